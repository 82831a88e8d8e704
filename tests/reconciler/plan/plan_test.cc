// The planner (pure): drift entries and ordered actions for every kind of difference the
// contract's section 6 names, and an empty plan for a converged bus.
#include "reconciler/plan/plan.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <random>

#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using model::ConsumerSpec;
using model::StreamSpec;
using observers::ObservedState;
using observers::ObservedUsersFile;
using test::DesiredFrom;
using test::ExampleRecordsJson;
using test::FakeRendered;
using test::ObservedFrom;

constexpr char kUsersPath[] = "/etc/nats/users.conf";

// The example records, their stand-in rendering, and a converged observation to spoil.
struct Fixture {
  model::DesiredState desired = DesiredFrom(ExampleRecordsJson());
  model::RenderedUsersFile rendered = FakeRendered(desired);
  ObservedState observed = ObservedFrom(desired, rendered);
  PlanOptions options{Prune::kNo, kUsersPath};

  PlanResult Run() const { return Plan(desired, rendered, observed, options); }

  observers::ObservedStream& Stream(const std::string& name) {
    for (auto& s : observed.jetstream.streams) {
      if (s.config.name.str() == name) return s;
    }
    FAIL("no observed stream " << name);
    throw std::logic_error("unreachable");
  }
  observers::ObservedConsumer& Consumer(const std::string& stream, const std::string& durable) {
    for (auto& c : observed.jetstream.consumers) {
      if (c.config.stream.str() == stream && c.config.durable.str() == durable) return c;
    }
    FAIL("no observed consumer " << stream << "/" << durable);
    throw std::logic_error("unreachable");
  }
  void RemoveStream(const std::string& name) {
    auto& streams = observed.jetstream.streams;
    streams.erase(std::remove_if(streams.begin(), streams.end(),
                                 [&](const auto& s) { return s.config.name.str() == name; }),
                  streams.end());
    auto& consumers = observed.jetstream.consumers;
    consumers.erase(std::remove_if(consumers.begin(), consumers.end(),
                                   [&](const auto& c) { return c.config.stream.str() == name; }),
                    consumers.end());
  }
  void RemoveConsumer(const std::string& stream, const std::string& durable) {
    auto& consumers = observed.jetstream.consumers;
    consumers.erase(std::remove_if(consumers.begin(), consumers.end(),
                                   [&](const auto& c) {
                                     return c.config.stream.str() == stream &&
                                            c.config.durable.str() == durable;
                                   }),
                    consumers.end());
  }
  // An observed stream that the records do not derive.
  void AddStream(const std::string& name, const std::string& description) {
    StreamSpec spec = desired.streams.front();
    spec.name = StreamName(name);
    spec.subjects = {"other." + name + ".>"};
    spec.description = description;
    observed.jetstream.streams.push_back({spec, "", ""});
  }
  void AddConsumer(const std::string& stream, const std::string& durable) {
    ConsumerSpec spec;
    spec.stream = StreamName(stream);
    spec.durable = ConsumerName(durable);
    spec.deliver_subject = "somewhere." + durable;
    observed.jetstream.consumers.push_back({spec, "", ""});
  }
};

const DriftEntry* Find(const PlanResult& plan, const std::string& name) {
  for (const auto& e : plan.drift) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<std::string> ActionNames(const PlanResult& plan) {
  std::vector<std::string> out;
  for (const auto& a : plan.actions) out.push_back(std::string(ToString(a.kind)) + " " + a.name);
  return out;
}

bool HasAction(const PlanResult& plan, ActionKind kind) {
  return std::any_of(plan.actions.begin(), plan.actions.end(),
                     [&](const Action& a) { return a.kind == kind; });
}

TEST_CASE("a converged bus plans nothing", "[plan]") {
  Fixture f;
  PlanResult plan = f.Run();
  CHECK(plan.drift.empty());
  CHECK(plan.actions.empty());
  CHECK(plan.problems.empty());
  CHECK(plan.converged());
}

TEST_CASE("property: Plan(desired, observation built from desired) is empty", "[plan]") {
  const uint32_t seed = GENERATE(range(1u, 41u));
  const int nodes = static_cast<int>(seed % 7);
  const int modules = 1 + static_cast<int>(seed % 4);
  const int seats = 1 + static_cast<int>(seed % 3);
  const int replicas = seed % 3 == 0 ? 3 : 1;
  model::DesiredState desired =
      DesiredFrom(test::GeneratedRecordsJson(seed, nodes, modules, seats, replicas));
  model::RenderedUsersFile rendered = FakeRendered(desired);
  ObservedState observed = ObservedFrom(desired, rendered);
  // The observers list in their own order; the plan must not care.
  std::mt19937 rng(seed);
  std::shuffle(observed.jetstream.streams.begin(), observed.jetstream.streams.end(), rng);
  std::shuffle(observed.jetstream.consumers.begin(), observed.jetstream.consumers.end(), rng);
  // Subjects are a set: order does not matter.
  for (auto& s : observed.jetstream.streams)
    std::reverse(s.config.subjects.begin(), s.config.subjects.end());
  for (Prune prune : {Prune::kNo, Prune::kYes}) {
    PlanResult plan = Plan(desired, rendered, observed, {prune, kUsersPath});
    INFO("seed " << seed);
    CHECK(plan.converged());
    CHECK(plan.drift.empty());
    CHECK(plan.actions.empty());
  }
}

TEST_CASE("an empty bus: everything missing, created in order", "[plan]") {
  Fixture f;
  f.observed.jetstream.streams.clear();
  f.observed.jetstream.consumers.clear();
  f.observed.users_file = {};  // absent
  PlanResult plan = f.Run();

  REQUIRE(plan.drift.size() == 1 + f.desired.streams.size() + f.desired.consumers.size());
  CHECK(plan.drift[0].kind == ObjectKind::kUsersFile);
  CHECK(plan.drift[0].state == DriftState::kMissing);
  CHECK(plan.drift[0].remedy == Remedy::kRewrite);
  for (size_t i = 0; i < f.desired.streams.size(); ++i) {
    const DriftEntry& e = plan.drift[1 + i];
    CHECK(e.kind == ObjectKind::kStream);
    CHECK(e.name == f.desired.streams[i].name.str());
    CHECK(e.state == DriftState::kMissing);
    CHECK(e.remedy == Remedy::kCreate);
  }
  const size_t first_consumer = 1 + f.desired.streams.size();
  for (size_t i = 0; i < f.desired.consumers.size(); ++i) {
    const DriftEntry& e = plan.drift[first_consumer + i];
    CHECK(e.kind == ObjectKind::kConsumer);
    CHECK(e.name ==
          f.desired.consumers[i].stream.str() + "/" + f.desired.consumers[i].durable.str());
    CHECK(e.state == DriftState::kMissing);
  }

  REQUIRE(plan.actions.size() == plan.drift.size());
  CHECK(plan.actions[0].kind == ActionKind::kWriteUsersFile);
  CHECK(plan.actions[0].users_file_bytes == f.rendered.bytes);
  for (size_t i = 0; i < f.desired.streams.size(); ++i) {
    const Action& a = plan.actions[1 + i];
    CHECK(a.kind == ActionKind::kCreateStream);
    REQUIRE(a.stream);
    CHECK(*a.stream == f.desired.streams[i]);
  }
  for (size_t i = 0; i < f.desired.consumers.size(); ++i) {
    const Action& a = plan.actions[first_consumer + i];
    CHECK(a.kind == ActionKind::kCreateConsumer);
    REQUIRE(a.consumer);
    CHECK(*a.consumer == f.desired.consumers[i]);
  }
  CHECK_FALSE(plan.converged());
}

// The streams an advisory names are planned alone before the whole account is observed; what
// that plan says about them must be exactly what the whole plan would say.
TEST_CASE("PlanStreams is the whole plan cut down to the named streams", "[plan]") {
  Fixture f;
  f.RemoveStream("SEAT_ledger");
  f.RemoveConsumer("DECL", "decl_node-a");
  f.Stream("EVENTS").config.max_age_ns += 1;
  f.AddConsumer("DECL", "decl_gone");  // unexpected
  f.observed.users_file = {};          // the users file is never part of it
  const PlanResult whole = f.Run();
  const std::set<StreamName> named = {StreamName("SEAT_ledger"), StreamName("DECL")};

  // Observed as ObserveStreams would: the named streams alone.
  ObservedState only = f.observed;
  std::erase_if(only.jetstream.streams,
                [&](const auto& s) { return named.count(s.config.name) == 0; });
  for (const ObservedState& observed : {f.observed, only}) {
    const PlanResult part = PlanStreams(f.desired, observed, named, f.options);
    PlanResult expected;
    for (const DriftEntry& e : whole.drift) {
      const std::string stream = e.name.substr(0, e.name.find('/'));
      if (e.kind != ObjectKind::kUsersFile && named.count(StreamName(stream))) {
        expected.drift.push_back(e);
      }
    }
    for (const Action& a : whole.actions) {
      const std::string stream = a.name.substr(0, a.name.find('/'));
      if (KindOf(a.kind) != ObjectKind::kUsersFile && named.count(StreamName(stream))) {
        expected.actions.push_back(a);
      }
    }
    CHECK(part.drift == expected.drift);
    CHECK(ActionNames(part) == ActionNames(expected));
    CHECK(part.actions == expected.actions);
    CHECK(Find(part, "EVENTS") == nullptr);  // drifted, but not named
  }
  CHECK(Find(whole, "EVENTS") != nullptr);
  CHECK(Find(whole, "DECL/decl_gone") != nullptr);
  CHECK(PlanStreams(f.desired, f.observed, {}, f.options).drift.empty());
}

// nats-server 2.15 limits each stream to 1,000 consumers unless it sets max_consumers itself
// (jetstream limits default_max_consumers). Found on Debian's 2.15.1: on the Large mesh (2,000
// nodes, a DECL consumer each) every pass sent 1,000 creations the server refused.
TEST_CASE("consumers beyond a stream's limit are unsatisfiable, the rest are created", "[plan]") {
  Fixture f;
  std::vector<std::string> decl;  // in name order
  for (const ConsumerSpec& c : f.desired.consumers) {
    if (c.stream.str() == "DECL") decl.push_back(c.durable.str());
  }
  const size_t on_decl = decl.size();
  REQUIRE(on_decl >= 2);
  for (const ConsumerSpec& c : f.desired.consumers) {
    if (c.stream.str() == "DECL") f.RemoveConsumer("DECL", c.durable.str());
  }
  f.AddConsumer("DECL", "");  // an ephemeral: the server counts it too
  auto creates_on_decl = [](const PlanResult& plan) {
    return std::count_if(plan.actions.begin(), plan.actions.end(), [](const Action& a) {
      return a.kind == ActionKind::kCreateConsumer && a.consumer->stream.str() == "DECL";
    });
  };

  SECTION("the server's default") {
    f.observed.server.default_max_consumers = static_cast<int64_t>(on_decl);  // 1 is taken
    const PlanResult plan = f.Run();
    CHECK(creates_on_decl(plan) == static_cast<int64_t>(on_decl) - 1);
    size_t unsatisfiable = 0;
    for (const DriftEntry& e : plan.drift) {
      if (e.remedy != Remedy::kUnsatisfiable) continue;
      ++unsatisfiable;
      CHECK(e.kind == ObjectKind::kConsumer);
      CHECK(e.note.find("default_max_consumers") != std::string::npos);
    }
    CHECK(unsatisfiable == 1);
    // The last in name order is the one left out: the same one every pass.
    REQUIRE(Find(plan, "DECL/" + decl.back()));
    CHECK(Find(plan, "DECL/" + decl.back())->remedy == Remedy::kUnsatisfiable);
    REQUIRE(plan.problems.size() == 1);
    CHECK(plan.problems[0] == "stream DECL may hold " + std::to_string(on_decl) +
                                  " consumers (the server's jetstream limits "
                                  "default_max_consumers); 1 the records derive do not fit and "
                                  "are not created: raise that limit");
    CHECK_FALSE(plan.converged());
    // Other streams are under the same default, with room to spare.
    CHECK(plan.actions.size() == on_decl - 1);
  }
  SECTION("the stream's own max_consumers wins over the default") {
    f.observed.server.default_max_consumers = 1;
    f.Stream("DECL").max_consumers = static_cast<int64_t>(on_decl) + 1;
    const PlanResult plan = f.Run();
    CHECK(creates_on_decl(plan) == static_cast<int64_t>(on_decl));
    CHECK(plan.problems.empty());
  }
  SECTION("no limit (2.14 and before, the default)") {
    const PlanResult plan = f.Run();
    CHECK(creates_on_decl(plan) == static_cast<int64_t>(on_decl));
    CHECK(plan.problems.empty());
  }
}

TEST_CASE("the plan is deterministic", "[plan]") {
  Fixture f;
  f.observed.jetstream.streams.clear();
  f.observed.jetstream.consumers.clear();
  f.AddStream("OLD", model::OwnershipMark(f.desired.mesh));
  f.AddConsumer("OLD", "gone");
  const PlanResult first = f.Run();
  std::reverse(f.observed.jetstream.streams.begin(), f.observed.jetstream.streams.end());
  const PlanResult second = f.Run();
  CHECK(first.drift == second.drift);
  CHECK(first.actions == second.actions);
}

TEST_CASE("users file: unreadable, garbage, and per-principal differences", "[plan]") {
  Fixture f;

  SECTION("unreadable: differs, rewrite") {
    f.observed.users_file = {ObservedUsersFile::State::kUnreadable, "", 0, "permission denied"};
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].state == DriftState::kDiffers);
    CHECK(plan.drift[0].remedy == Remedy::kRewrite);
    REQUIRE(plan.drift[0].fields.size() == 1);
    CHECK(plan.drift[0].fields[0].field == "file");
    CHECK(plan.drift[0].fields[0].found == "unreadable: permission denied");
    CHECK(ActionNames(plan) == std::vector<std::string>{"write_users_file /etc/nats/users.conf"});
  }

  SECTION("garbage: the file as a whole differs") {
    f.observed.users_file.bytes = "this is { not a users file";
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    REQUIRE(plan.drift[0].fields.size() == 1);
    CHECK(plan.drift[0].fields[0].field == "file");
    CHECK(plan.drift[0].fields[0].found.find("unparseable") != std::string::npos);
    CHECK(plan.drift[0].remedy == Remedy::kRewrite);
  }

  SECTION("hand-edited: names the principals that differ, never their hashes") {
    std::string bytes = f.rendered.bytes;
    // node-a's hash edited, billing's entry removed, a stranger added.
    const std::string node_a_hash = "$2b$04$stand.in.hash.for.node-a";
    bytes.replace(bytes.find(node_a_hash), node_a_hash.size(), "$2b$04$edited.by.hand");
    const std::string& billing = f.rendered.BlockAt(UserName("billing"));
    bytes.erase(bytes.find(billing), billing.size());
    const std::string& shop = f.rendered.BlockAt(UserName("shop"));
    std::string stranger = shop;
    stranger.replace(stranger.find("\"shop\""), 6, "\"stranger\"");
    bytes.insert(bytes.find(shop), stranger);
    f.observed.users_file.bytes = bytes;

    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    const DriftEntry& e = plan.drift[0];
    CHECK(e.kind == ObjectKind::kUsersFile);
    CHECK(e.name == kUsersPath);
    CHECK(e.state == DriftState::kDiffers);
    CHECK(e.remedy == Remedy::kRewrite);
    CHECK(e.fields == std::vector<FieldDiff>{{"principal billing", "present", "absent"},
                                             {"principal node-a", "present", "differs"},
                                             {"principal stranger", "absent", "present"}});
    for (const FieldDiff& d : e.fields) {
      CHECK(d.wanted.find("$2") == std::string::npos);
      CHECK(d.found.find("$2") == std::string::npos);
    }
  }

  SECTION("bytes differ outside the entries") {
    f.observed.users_file.bytes = "# a comment added by hand\n" + f.rendered.bytes;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].fields ==
          std::vector<FieldDiff>{{"file", "as rendered", "differs outside the user entries"}});
  }
}

TEST_CASE("users file: its mode, owner and kind are drift, repaired by a rewrite", "[plan]") {
  Fixture f;
  f.options.users_file_owner_uid = 1000;
  f.observed.users_file.owner_uid = 1000;
  REQUIRE(f.Run().converged());

  SECTION("a mode other than 0600") {
    f.observed.users_file.mode = 0644;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].state == DriftState::kDiffers);
    CHECK(plan.drift[0].remedy == Remedy::kRewrite);
    CHECK(plan.drift[0].fields == std::vector<FieldDiff>{{"mode", "0600", "0644"}});
    REQUIRE(plan.actions.size() == 1);
    CHECK(plan.actions[0].kind == ActionKind::kWriteUsersFile);
    CHECK(plan.actions[0].users_file_bytes == f.rendered.bytes);
  }
  SECTION("another owner") {
    f.observed.users_file.owner_uid = 0;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].fields == std::vector<FieldDiff>{{"owner", "uid 1000", "uid 0"}});
    CHECK(ActionNames(plan) == std::vector<std::string>{"write_users_file /etc/nats/users.conf"});
  }
  SECTION("the owner unchecked without an expected uid") {
    f.observed.users_file.owner_uid = 0;
    f.options.users_file_owner_uid.reset();
    CHECK(f.Run().converged());
  }
  SECTION("content, mode and owner all at once: every field named") {
    f.observed.users_file.bytes = "# a comment added by hand\n" + f.rendered.bytes;
    f.observed.users_file.mode = 0666;
    f.observed.users_file.owner_uid = 4242;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].fields ==
          std::vector<FieldDiff>{{"file", "as rendered", "differs outside the user entries"},
                                 {"mode", "0600", "0666"},
                                 {"owner", "uid 1000", "uid 4242"}});
  }
  SECTION("a symbolic link in its place") {
    f.observed.users_file = {};
    f.observed.users_file.state = ObservedUsersFile::State::kPresent;
    f.observed.users_file.kind = ObservedUsersFile::Kind::kSymlink;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].fields ==
          std::vector<FieldDiff>{{"file", "regular file", "symbolic link"}});
    CHECK(ActionNames(plan) == std::vector<std::string>{"write_users_file /etc/nats/users.conf"});
  }
}

TEST_CASE("users file on disk as rendered but not loaded: reload only", "[plan]") {
  Fixture f;
  f.observed.server.config_load_time_unix_ns = test::kFileMtime - 1;
  PlanResult plan = f.Run();
  REQUIRE(plan.drift.size() == 1);
  CHECK(plan.drift[0].state == DriftState::kDiffers);
  CHECK(plan.drift[0].remedy == Remedy::kReload);
  CHECK(plan.drift[0].fields ==
        std::vector<FieldDiff>{{"server", "loaded", "not loaded by the server"}});
  REQUIRE(plan.actions.size() == 1);
  CHECK(plan.actions[0].kind == ActionKind::kReloadServer);
  CHECK(plan.actions[0].users_file_bytes.empty());

  SECTION("unknown when the monitor is unreachable or unconfigured: no drift") {
    f.observed.server.reachable = false;
    CHECK(f.Run().converged());
    f.observed.server = {};
    CHECK(f.Run().converged());
  }
  SECTION("unknown load time: no drift") {
    f.observed.server.config_load_time_unix_ns = 0;
    CHECK(f.Run().converged());
  }
}

TEST_CASE("users file unmanaged: never planned", "[plan]") {
  Fixture f;
  f.options.users_file_path.clear();
  f.observed.users_file = {};
  CHECK(f.Run().converged());
}

TEST_CASE("streams: missing, differing in place, and differing in retention or storage", "[plan]") {
  Fixture f;

  SECTION("missing with its consumers: stream created before them") {
    f.RemoveStream("SEAT_invoicer");
    PlanResult plan = f.Run();
    CHECK(ActionNames(plan) == std::vector<std::string>{"create_stream SEAT_invoicer",
                                                        "create_consumer SEAT_invoicer/worker"});
    REQUIRE(Find(plan, "SEAT_invoicer/worker"));
    CHECK(Find(plan, "SEAT_invoicer/worker")->state == DriftState::kMissing);
  }

  SECTION("subjects and max age: updated in place, fields wanted and found") {
    auto& events = f.Stream("EVENTS");
    events.config.subjects = {"mesh.evt.x", "mesh.evt.>"};
    events.config.max_age_ns = 3600 * model::kNanosPerSecond;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    const DriftEntry& e = plan.drift[0];
    CHECK(e.name == "EVENTS");
    CHECK(e.state == DriftState::kDiffers);
    CHECK(e.remedy == Remedy::kUpdateInPlace);
    CHECK(e.fields == std::vector<FieldDiff>{{"subjects", "mesh.evt.>", "mesh.evt.>, mesh.evt.x"},
                                             {"max_age", "604800s", "3600s"}});
    REQUIRE(plan.actions.size() == 1);
    CHECK(plan.actions[0].kind == ActionKind::kUpdateStream);
    CHECK(*plan.actions[0].stream == f.desired.streams[2]);  // CONTROL, DECL, EVENTS, ...
  }

  SECTION("every other owned field") {
    auto& control = f.Stream("CONTROL");
    control.config.replicas = 3;
    control.config.max_msgs = 10;
    control.config.max_bytes = 1024;
    control.config.discard = model::Discard::kNew;
    f.observed.server.jetstream_cluster_size = 3;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].fields == std::vector<FieldDiff>{{"replicas", "1", "3"},
                                                         {"max_msgs", "unlimited", "10"},
                                                         {"max_bytes", "unlimited", "1024"},
                                                         {"discard", "old", "new"}});
    CHECK(plan.drift[0].remedy == Remedy::kUpdateInPlace);
  }

  SECTION("retention or storage: report only, never recreated") {
    f.Stream("DECL").config.retention = model::Retention::kLimits;
    f.Stream("EVENTS").config.storage = model::Storage::kMemory;
    f.Stream("EVENTS").config.max_age_ns = 0;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 2);
    for (const DriftEntry& e : plan.drift) {
      CHECK(e.remedy == Remedy::kReportOnly);
      CHECK(e.note.find("10052") != std::string::npos);
      CHECK_FALSE(e.repairable_in_place());
    }
    CHECK(plan.drift[0].fields == std::vector<FieldDiff>{{"retention", "workqueue", "limits"}});
    CHECK(plan.drift[1].fields == std::vector<FieldDiff>{{"storage", "file", "memory"},
                                                         {"max_age", "604800s", "unlimited"}});
    CHECK(plan.actions.empty());
  }
}

TEST_CASE("streams without the ownership mark are never touched", "[plan]") {
  Fixture f;

  SECTION("a desired name present without the mark: differs, report only") {
    auto& decl = f.Stream("DECL");
    decl.config.description = "made by hand";
    decl.config.subjects = {"elsewhere.>"};
    f.RemoveConsumer("DECL", "decl_node-a");  // would be missing, but DECL is not ours
    f.AddConsumer("DECL", "hand-made");       // would be unexpected, but DECL is not ours
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    const DriftEntry& e = plan.drift[0];
    CHECK(e.name == "DECL");
    CHECK(e.state == DriftState::kDiffers);
    CHECK(e.remedy == Remedy::kReportOnly);
    CHECK(e.note == "not managed (no ownership mark); never touched");
    CHECK(e.fields ==
          std::vector<FieldDiff>{{"subjects", "mesh.decl.*", "elsewhere.>"},
                                 {"description", model::OwnershipMark("demo"), "made by hand"}});
    CHECK(plan.actions.empty());
  }

  SECTION("an undesired stream without the mark: not even reported") {
    f.AddStream("THEIRS", "");
    f.AddStream("OTHER_MESH", model::OwnershipMark("another-mesh"));
    f.AddConsumer("THEIRS", "theirs");
    f.options.prune = Prune::kYes;
    CHECK(f.Run().converged());
  }
}

TEST_CASE("unexpected streams and consumers: left alone, deleted with --prune", "[plan]") {
  Fixture f;
  const std::string mark = model::OwnershipMark(f.desired.mesh);
  f.AddStream("SEAT_retired", mark);
  f.AddConsumer("SEAT_retired", "worker");
  f.AddConsumer("EVENTS", "ev_gone_x_y");
  f.AddConsumer("EVENTS", "");  // ephemeral: ignored

  SECTION("without --prune") {
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 3);
    CHECK(plan.drift[0].name == "SEAT_retired");
    CHECK(plan.drift[1].name == "EVENTS/ev_gone_x_y");
    CHECK(plan.drift[2].name == "SEAT_retired/worker");
    for (const DriftEntry& e : plan.drift) {
      CHECK(e.state == DriftState::kUnexpected);
      CHECK(e.remedy == Remedy::kLeave);
      CHECK(e.note.find("--prune") != std::string::npos);
    }
    CHECK(plan.actions.empty());
  }

  SECTION("with --prune: the stream deleted, its consumers with it") {
    f.options.prune = Prune::kYes;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 3);
    for (const DriftEntry& e : plan.drift) CHECK(e.remedy == Remedy::kPrune);
    CHECK(ActionNames(plan) == std::vector<std::string>{"delete_stream SEAT_retired",
                                                        "delete_consumer EVENTS/ev_gone_x_y"});
    CHECK(plan.actions[0].target_stream == StreamName("SEAT_retired"));
    CHECK(plan.actions[1].target_stream == StreamName("EVENTS"));
    CHECK(plan.actions[1].target_consumer == ConsumerName("ev_gone_x_y"));
  }
}

TEST_CASE("consumers: missing, updated in place, report only", "[plan]") {
  Fixture f;

  SECTION("missing on an existing stream") {
    f.RemoveConsumer("DECL", "decl_node-b");
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].name == "DECL/decl_node-b");
    CHECK(plan.drift[0].state == DriftState::kMissing);
    CHECK(ActionNames(plan) == std::vector<std::string>{"create_consumer DECL/decl_node-b"});
  }

  SECTION("filter, deliver subject, group, ack wait, max deliver: updated in place") {
    auto& worker = f.Consumer("SEAT_ledger", "worker").config;
    worker.filter_subject = "mesh.work.ledger.post";
    worker.deliver_subject = "mesh.q.other";
    worker.deliver_group = "";
    worker.ack_wait_ns = 5 * model::kNanosPerSecond;
    worker.max_deliver = -1;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].remedy == Remedy::kUpdateInPlace);
    CHECK(plan.drift[0].fields ==
          std::vector<FieldDiff>{{"filter_subject", "(none)", "mesh.work.ledger.post"},
                                 {"deliver_subject", "mesh.q.ledger", "mesh.q.other"},
                                 {"deliver_group", "ledger", "(none)"},
                                 {"ack_wait", "30s", "5s"},
                                 {"max_deliver", "10", "unlimited"}});
    REQUIRE(plan.actions.size() == 1);
    CHECK(plan.actions[0].kind == ActionKind::kUpdateConsumer);
    CHECK(plan.actions[0].consumer->deliver_group == "ledger");
  }

  SECTION("ack, deliver or replay policy: report only (10012)") {
    f.Consumer("CONTROL", "controller").config.ack = model::AckPolicy::kAll;
    f.Consumer("DECL", "decl_node-a").config.deliver = model::DeliverPolicy::kNew;
    f.Consumer("DECL", "decl_node-b").config.replay = model::ReplayPolicy::kOriginal;
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 3);
    for (const DriftEntry& e : plan.drift) {
      CHECK(e.remedy == Remedy::kReportOnly);
      CHECK(e.note.find("10012") != std::string::npos);
    }
    CHECK(plan.drift[0].fields == std::vector<FieldDiff>{{"ack_policy", "explicit", "all"}});
    CHECK(plan.actions.empty());
  }
}

TEST_CASE("objects a clustered list names in \"missing\": unhealthy, not compared, not converged",
          "[plan]") {
  Fixture f;
  auto undescribed = [&](const std::string& stream, const std::string& consumer) {
    f.observed.jetstream.undescribed.push_back(
        {StreamName(stream), ConsumerName(consumer), "offline: peer n2 is offline"});
  };

  SECTION("a desired stream: neither created nor compared, nor its consumers") {
    f.RemoveStream("DECL");  // the list gives no state for it
    undescribed("DECL", "");
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 1);
    CHECK(plan.drift[0].name == "DECL");
    CHECK(plan.drift[0].state == DriftState::kUnhealthy);
    CHECK(plan.drift[0].remedy == Remedy::kReportOnly);
    CHECK(plan.drift[0].note.find("offline: peer n2 is offline") != std::string::npos);
    CHECK(plan.actions.empty());  // DECL's consumers are not "missing"
    CHECK(plan.undescribed == 1);
    REQUIRE(plan.problems.size() == 1);
    CHECK(plan.problems[0].find("(first: DECL)") != std::string::npos);
    CHECK_FALSE(plan.converged());
  }

  SECTION("a desired consumer on a described stream: not created, the others compared") {
    f.RemoveConsumer("DECL", "decl_node-a");
    f.RemoveConsumer("DECL", "decl_node-b");
    undescribed("DECL", "decl_node-a");
    PlanResult plan = f.Run();
    REQUIRE(plan.drift.size() == 2);
    CHECK(Find(plan, "DECL/decl_node-a")->state == DriftState::kUnhealthy);
    CHECK(Find(plan, "DECL/decl_node-b")->state == DriftState::kMissing);
    CHECK(ActionNames(plan) == std::vector<std::string>{"create_consumer DECL/decl_node-b"});
    CHECK(plan.undescribed == 1);
  }

  SECTION("another tenant's stream and consumer: nobody's drift, no problem") {
    undescribed("TENANT", "");
    undescribed("DECL", "someone_elses");
    PlanResult plan = f.Run();
    CHECK(plan.drift.empty());
    CHECK(plan.problems.empty());
    CHECK(plan.undescribed == 0);
    CHECK(plan.converged());
  }

  SECTION("with --prune, an undescribed durable on an owned stream is not deleted") {
    f.options.prune = Prune::kYes;
    undescribed("DECL", "someone_elses");
    CHECK(f.Run().actions.empty());
  }
}

TEST_CASE("actions are ordered: users file, streams, consumers, each by create, update, delete",
          "[plan]") {
  Fixture f;
  f.options.prune = Prune::kYes;
  f.observed.users_file = {};
  f.RemoveStream("SEAT_ledger");
  f.Stream("CONTROL").config.max_msgs = 5;
  f.AddStream("AA_OLD", model::OwnershipMark(f.desired.mesh));
  f.RemoveConsumer("CONTROL", "controller");
  f.Consumer("DECL", "decl_node-a").config.ack_wait_ns = 1;
  f.AddConsumer("CONTROL", "stray");
  PlanResult plan = f.Run();
  CHECK(ActionNames(plan) == std::vector<std::string>{
                                 "write_users_file /etc/nats/users.conf",
                                 "create_stream SEAT_ledger",
                                 "update_stream CONTROL",
                                 "delete_stream AA_OLD",
                                 "create_consumer CONTROL/controller",
                                 "create_consumer SEAT_ledger/worker",
                                 "update_consumer DECL/decl_node-a",
                                 "delete_consumer CONTROL/stray",
                             });
  // Drift: users file, then streams by name, then consumers by (stream, durable).
  std::vector<std::string> names;
  for (const auto& e : plan.drift) names.push_back(e.name);
  CHECK(names == std::vector<std::string>{kUsersPath, "AA_OLD", "CONTROL", "SEAT_ledger",
                                          "CONTROL/controller", "CONTROL/stray", "DECL/decl_node-a",
                                          "SEAT_ledger/worker"});
}

TEST_CASE("replicas above the cluster size: unsatisfiable, no stream created or updated",
          "[plan]") {
  const std::string json = test::GeneratedRecordsJson(7, 2, 1, 1, /*replicas=*/3);
  model::DesiredState desired = DesiredFrom(json);
  model::RenderedUsersFile rendered = FakeRendered(desired);
  ObservedState observed = ObservedFrom(desired, rendered);
  observed.server.jetstream_cluster_size = 1;  // counted by the monitoring endpoint
  observed.jetstream.cluster_size = 1;
  // One stream missing (with its consumer), one differing in place, one consumer missing on a
  // present stream.
  const std::string gone = "SEAT_m0-s0";
  auto& streams = observed.jetstream.streams;
  streams.erase(std::remove_if(streams.begin(), streams.end(),
                               [&](const auto& s) { return s.config.name.str() == gone; }),
                streams.end());
  auto& consumers = observed.jetstream.consumers;
  consumers.erase(std::remove_if(consumers.begin(), consumers.end(),
                                 [&](const auto& c) {
                                   return c.config.stream.str() == gone ||
                                          c.config.stream.str() == "CONTROL";
                                 }),
                  consumers.end());
  for (auto& s : streams) {
    if (s.config.name.str() == "EVENTS") s.config.max_age_ns = 1;
  }

  PlanResult plan = Plan(desired, rendered, observed, {Prune::kNo, kUsersPath});
  CHECK(plan.problems ==
        std::vector<std::string>{"records ask for 3 replicas, the JetStream cluster has 1 server"});
  CHECK_FALSE(HasAction(plan, ActionKind::kCreateStream));
  CHECK_FALSE(HasAction(plan, ActionKind::kUpdateStream));
  REQUIRE(Find(plan, gone));
  CHECK(Find(plan, gone)->remedy == Remedy::kUnsatisfiable);
  CHECK(Find(plan, gone)->note == plan.problems[0]);
  REQUIRE(Find(plan, "EVENTS"));
  CHECK(Find(plan, "EVENTS")->remedy == Remedy::kUnsatisfiable);
  REQUIRE(Find(plan, gone + "/worker"));
  CHECK(Find(plan, gone + "/worker")->remedy == Remedy::kUnsatisfiable);
  // A consumer on a stream that exists can still be created.
  CHECK(ActionNames(plan) == std::vector<std::string>{"create_consumer CONTROL/controller"});
  CHECK_FALSE(plan.converged());

  SECTION("a cluster large enough, counted by the monitoring endpoint: satisfiable") {
    // An empty cluster shows no stream group: only the monitoring endpoint knows its size.
    observed.server.jetstream_cluster_size = 3;
    PlanResult ok = Plan(desired, rendered, observed, {Prune::kNo, kUsersPath});
    CHECK(ok.problems.empty());
    CHECK(HasAction(ok, ActionKind::kCreateStream));
    CHECK(HasAction(ok, ActionKind::kUpdateStream));
  }
  SECTION("no monitoring endpoint: the streams' groups are a lower bound") {
    observed.server = {};
    PlanResult lower = Plan(desired, rendered, observed, {Prune::kNo, kUsersPath});
    CHECK(lower.problems == std::vector<std::string>{
                                "records ask for 3 replicas, the JetStream bus shows 1 server (a "
                                "lower bound: give --monitor to count the cluster's servers)"});
    observed.jetstream.cluster_size = 3;  // a stream with a group of 3 was seen
    CHECK(Plan(desired, rendered, observed, {Prune::kNo, kUsersPath}).problems.empty());
  }
}

TEST_CASE("labels of kinds, states, remedies and actions", "[plan]") {
  CHECK(std::string(ToString(ObjectKind::kUsersFile)) == "users_file");
  CHECK(std::string(ToString(DriftState::kUnexpected)) == "unexpected");
  CHECK(std::string(ToString(Remedy::kUpdateInPlace)) == "update_in_place");
  CHECK(std::string(ToString(ActionKind::kDeleteConsumer)) == "delete_consumer");
  CHECK(KindOf(ActionKind::kReloadServer) == ObjectKind::kUsersFile);
  CHECK(KindOf(ActionKind::kUpdateStream) == ObjectKind::kStream);
  CHECK(KindOf(ActionKind::kCreateConsumer) == ObjectKind::kConsumer);
  CHECK(std::string(VerbOf(ActionKind::kWriteUsersFile)) == "write");
  CHECK(std::string(VerbOf(ActionKind::kReloadServer)) == "reload");
  CHECK(std::string(VerbOf(ActionKind::kUpdateConsumer)) == "update");
  CHECK(std::string(VerbOf(ActionKind::kDeleteStream)) == "delete");
}

}  // namespace
}  // namespace mesh::reconciler

namespace mesh::reconciler {
namespace {

TEST_CASE("an owned object the observer could not read is reported, never acted on", "[plan]") {
  Fixture f;
  f.Stream("EVENTS").problem = "config.retention: unknown value \"forever\"";
  f.Stream("EVENTS").config.max_age_ns = 1;  // would be an update, were it readable
  f.Consumer("DECL", "decl_node-a").problem = "config.ack_policy: unknown value \"flow\"";
  f.RemoveConsumer("CONTROL", "controller");  // the rest is planned as usual
  f.AddStream("KV_foreign", "");
  f.Stream("KV_foreign").problem = "config.storage: unknown value \"tape\"";
  PlanResult plan = f.Run();
  const DriftEntry* events = Find(plan, "EVENTS");
  REQUIRE(events);
  CHECK(events->state == DriftState::kDiffers);
  CHECK(events->remedy == Remedy::kReportOnly);
  CHECK(events->fields == std::vector<FieldDiff>{{"config", "readable",
                                                  "config.retention: unknown value \"forever\""}});
  const DriftEntry* decl = Find(plan, "DECL/decl_node-a");
  REQUIRE(decl);
  CHECK(decl->remedy == Remedy::kReportOnly);
  CHECK(Find(plan, "KV_foreign") == nullptr);  // foreign: ignored, problem and all
  CHECK(ActionNames(plan) == std::vector<std::string>{"create_consumer CONTROL/controller"});
}

TEST_CASE("an update carries the server's whole observed config", "[plan]") {
  Fixture f;
  f.Stream("EVENTS").config.max_age_ns = 1;
  f.Stream("EVENTS").raw_config = R"({"name":"EVENTS","compression":"s2"})";
  f.Consumer("DECL", "decl_node-a").config.max_deliver = 3;
  f.Consumer("DECL", "decl_node-a").raw_config = R"({"durable_name":"decl_node-a"})";
  PlanResult plan = f.Run();
  REQUIRE(plan.actions.size() == 2);
  CHECK(plan.actions[0].kind == ActionKind::kUpdateStream);
  CHECK(plan.actions[0].observed_config == R"({"name":"EVENTS","compression":"s2"})");
  CHECK(plan.actions[1].kind == ActionKind::kUpdateConsumer);
  CHECK(plan.actions[1].observed_config == R"({"durable_name":"decl_node-a"})");
}

}  // namespace
}  // namespace mesh::reconciler
