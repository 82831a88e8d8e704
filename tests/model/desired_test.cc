// Derive (model/desired.h): the example's whole desired state against a golden file; each row
// of the contract's tables (streams section 2, consumers section 3, permissions section 4) on
// the example; and properties that must hold for any valid records, checked on generated
// meshes of several sizes and seeds.
#include "model/desired.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "bench/support/mesh_gen.h"
#include "model/desired_json.h"
#include "model/users_file.h"
#include "tests/model/fixtures.h"
#include "tests/support/nats_server.h"

namespace mesh::model {
namespace {

using test::DeriveExample;
using test::PrincipalOf;
using Strings = std::vector<std::string>;

const StreamSpec* FindStream(const DesiredState& d, const std::string& name) {
  for (const StreamSpec& s : d.streams) {
    if (s.name.str() == name) return &s;
  }
  return nullptr;
}

const ConsumerSpec* FindConsumer(const DesiredState& d, const ConsumerId& id) {
  for (const ConsumerSpec& c : d.consumers) {
    if (c.stream == id.stream && c.durable == id.durable) return &c;
  }
  return nullptr;
}

// NATS subject matching: `*` matches one token, `>` one or more trailing tokens.
bool Covers(const std::string& pattern, const std::string& subject) {
  auto tokens = [](const std::string& s) {
    Strings out;
    size_t start = 0;
    while (true) {
      const size_t dot = s.find('.', start);
      out.push_back(s.substr(start, dot - start));
      if (dot == std::string::npos) return out;
      start = dot + 1;
    }
  };
  const Strings p = tokens(pattern);
  const Strings s = tokens(subject);
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == ">") return s.size() > i;
    if (i >= s.size() || (p[i] != "*" && p[i] != s[i])) return false;
  }
  return p.size() == s.size();
}

// Principal's defaulted == is deleted while Credential has no ==: compare field by field.
bool SamePrincipals(const std::vector<Principal>& a, const std::vector<Principal>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].user != b[i].user || a[i].kind != b[i].kind ||
        a[i].credential.kind != b[i].credential.kind ||
        a[i].credential.secret != b[i].credential.secret ||
        a[i].publish_allow != b[i].publish_allow || a[i].subscribe_allow != b[i].subscribe_allow) {
      return false;
    }
  }
  return true;
}

bool SortedUnique(const Strings& v) {
  for (size_t i = 1; i < v.size(); ++i) {
    if (!(v[i - 1] < v[i])) return false;
  }
  return true;
}

TEST_CASE("golden: the example's desired state", "[derive]") {
  const DesiredState desired = DeriveExample();
  BcryptHasher hasher("golden-salt-key", test::kCheapCost);
  auto hashes = hasher.HashAll(desired);
  REQUIRE(hashes.ok());
  auto users = RenderUsersFile(desired, *hashes);
  REQUIRE(users.ok());
  const std::string actual = DesiredToJson(desired, &users.value());

  const std::string path =
      std::string(MESH_SOURCE_DIR) + "/tests/model/golden/example_desired.json";
  const char* update = std::getenv("MESH_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    mesh::testing::WriteFile(path, actual);
    WARN("rewrote " << path);
  }
  INFO("regenerate with MESH_UPDATE_GOLDEN=1 after a deliberate change");
  CHECK(actual == mesh::testing::ReadFile(path));
  // The JSON names credentials' kinds, never their secrets or hashes.
  CHECK(actual.find("demo-only") == std::string::npos);
  CHECK(actual.find(test::kReconcilerPassword) == std::string::npos);
  CHECK(actual.find("$2b$") == std::string::npos);
}

TEST_CASE("streams: CONTROL, DECL, EVENTS and SEAT_<seat> with every owned field", "[derive]") {
  const DesiredState d = DeriveExample();
  Strings names;
  for (const StreamSpec& s : d.streams) names.push_back(s.name.str());
  CHECK(names == Strings{"CONTROL", "DECL", "EVENTS", "SEAT_intake", "SEAT_invoicer", "SEAT_ledger",
                         "SEAT_mesh-archive", "SEAT_mesh-build", "SEAT_mesh-notify"});
  for (const StreamSpec& s : d.streams) {
    INFO(s.name.str());
    CHECK(s.storage == Storage::kFile);
    CHECK(s.replicas == 1);
    CHECK(s.discard == Discard::kOld);
    CHECK(s.max_msgs == kUnlimited);
    CHECK(s.max_bytes == kUnlimited);
    CHECK(s.description == "mesh demo: managed by mesh-reconciler");
  }
  const StreamSpec* control = FindStream(d, "CONTROL");
  CHECK(control->subjects == Strings{"mesh.control.>"});
  CHECK(control->retention == Retention::kWorkQueue);
  CHECK(control->max_age_ns == 0);
  const StreamSpec* decl = FindStream(d, "DECL");
  CHECK(decl->subjects == Strings{"mesh.decl.*"});
  CHECK(decl->retention == Retention::kWorkQueue);
  CHECK(decl->max_age_ns == 0);
  const StreamSpec* events = FindStream(d, "EVENTS");
  CHECK(events->subjects == Strings{"mesh.evt.>"});
  CHECK(events->retention == Retention::kLimits);
  CHECK(events->max_age_ns == 604800 * kNanosPerSecond);
  // A seat's queue exists whether or not anybody holds it (mesh-archive has no holder).
  const StreamSpec* archive = FindStream(d, "SEAT_mesh-archive");
  CHECK(archive->subjects == Strings{"mesh.work.mesh-archive.*"});
  CHECK(archive->retention == Retention::kWorkQueue);
  CHECK(archive->max_age_ns == 0);
}

TEST_CASE("streams follow bus.replicas, events_max_age_seconds and the mesh name", "[derive]") {
  Records r = test::Example();
  r.mesh = "other";
  r.bus.replicas = 3;
  r.bus.events_max_age_seconds = 120;
  ReconcilerIdentity renamed = test::Reconciler();
  renamed.user = UserName("custom-reconciler");
  const DesiredState d = Derive(r, renamed);
  CHECK(d.replicas == 3);
  for (const StreamSpec& s : d.streams) {
    CHECK(s.replicas == 3);
    // Literally "mesh-reconciler", whatever the reconciler's user is called.
    CHECK(s.description == "mesh other: managed by mesh-reconciler");
  }
  CHECK(FindStream(d, "EVENTS")->max_age_ns == 120 * kNanosPerSecond);
  CHECK(OwnershipMark("other") == "mesh other: managed by mesh-reconciler");
}

TEST_CASE("consumers: one row of the table each", "[derive]") {
  const DesiredState d = DeriveExample();
  CHECK(d.consumers.size() == 15);  // 1 CONTROL + 3 DECL + 5 EVENTS + 6 SEAT_
  for (const ConsumerSpec& c : d.consumers) {
    INFO(c.stream.str() << "/" << c.durable.str());
    CHECK(c.ack == AckPolicy::kExplicit);
    CHECK(c.deliver == DeliverPolicy::kAll);
    CHECK(c.replay == ReplayPolicy::kInstant);
    CHECK(c.ack_wait_ns == 30 * kNanosPerSecond);
    CHECK(c.durable.str().find('.') == std::string::npos);
  }

  SECTION("CONTROL / controller never dead-letters") {
    const ConsumerSpec* c = FindConsumer(d, ControlConsumer());
    REQUIRE(c != nullptr);
    CHECK(c->stream.str() == "CONTROL");
    CHECK(c->durable.str() == "controller");
    CHECK(c->filter_subject == "mesh.control.>");
    CHECK(c->deliver_subject == "mesh.in.mesh-controller.control");
    CHECK(c->deliver_group.empty());
    CHECK(c->max_deliver == kUnlimited);
  }
  SECTION("DECL / decl_<node>, one per node, credential or not") {
    for (const std::string node : {"node-a", "node-b", "node-c"}) {
      const ConsumerSpec* c = FindConsumer(d, DeclConsumer(node));
      REQUIRE(c != nullptr);
      CHECK(c->stream.str() == "DECL");
      CHECK(c->durable.str() == "decl_" + node);
      CHECK(c->filter_subject == "mesh.decl." + node);
      CHECK(c->deliver_subject == "mesh.in." + node + ".decl");
      CHECK(c->deliver_group.empty());
      CHECK(c->max_deliver == kUnlimited);
    }
  }
  SECTION("SEAT_<seat> / worker, queue group <seat>, held or not") {
    for (const std::string seat :
         {"intake", "invoicer", "ledger", "mesh-archive", "mesh-build", "mesh-notify"}) {
      const ConsumerSpec* c = FindConsumer(d, SeatWorker(seat));
      REQUIRE(c != nullptr);
      CHECK(c->stream.str() == "SEAT_" + seat);
      CHECK(c->durable.str() == "worker");
      CHECK(c->filter_subject.empty());
      CHECK(c->deliver_subject == "mesh.q." + seat);
      CHECK(c->deliver_group == seat);
      CHECK(c->max_deliver == 10);
    }
  }
  SECTION("EVENTS / ev_<follower>_<seat>_<event>, the controller's follows included") {
    Strings durables;
    for (const ConsumerSpec& c : d.consumers) {
      if (c.stream.str() == "EVENTS") durables.push_back(c.durable.str());
    }
    CHECK(durables == Strings{"ev_billing_mesh-build_built", "ev_mesh-controller_invoicer_invoiced",
                              "ev_mesh-controller_mesh-build_built", "ev_shop_invoicer_invoiced",
                              "ev_shop_ledger_posted"});
    const ConsumerSpec* c = FindConsumer(d, EventConsumer("shop", {"ledger", "posted"}));
    REQUIRE(c != nullptr);
    CHECK(c->filter_subject == "mesh.evt.ledger.posted");
    CHECK(c->deliver_subject == "mesh.in.shop.ev.ledger.posted");
    CHECK(c->deliver_group.empty());
    CHECK(c->max_deliver == 10);
  }
}

TEST_CASE("ConsumerId: the durable name and the ack permission come from one function",
          "[derive]") {
  CHECK(ControlConsumer().AckPermission() == "$JS.ACK.CONTROL.controller.>");
  CHECK(DeclConsumer("node-a").AckPermission() == "$JS.ACK.DECL.decl_node-a.>");
  CHECK(SeatWorker("mesh-build").AckPermission() == "$JS.ACK.SEAT_mesh-build.worker.>");
  const ConsumerId ev = EventConsumer("shop", {"ledger", "posted"});
  CHECK(ev.stream.str() == "EVENTS");
  CHECK(ev.durable.str() == "ev_shop_ledger_posted");
  CHECK(ev.AckPermission() == "$JS.ACK.EVENTS.ev_shop_ledger_posted.>");
}

// The advisory filter wakes for durables of this shape (reconciler/plan/advisory_filter.h): every
// consumer the records derive has it, and a server-named ephemeral never does.
TEST_CASE("HasMeshDurableShape: every derived consumer has it, an ephemeral never", "[derive]") {
  const DesiredState d = DeriveExample();
  REQUIRE_FALSE(d.consumers.empty());
  for (const auto& c : d.consumers) {
    INFO(c.stream.str() << "/" << c.durable.str());
    CHECK(HasMeshDurableShape(c.stream.str(), c.durable.str()));
  }
  CHECK(HasMeshDurableShape("DECL", "decl_node-z"));  // a node the records no longer hold
  for (const char* ephemeral : {"Xk3bQ9aZ", "Ab3xKq9Z", "decl_", "ev_a_b", "ev_a_b_c_d", "ev_A_b_c",
                                "ev__b_c", "worker2", ""}) {
    INFO(ephemeral);
    for (const char* stream : {"CONTROL", "DECL", "EVENTS", "SEAT_ledger"}) {
      CHECK_FALSE(HasMeshDurableShape(stream, ephemeral));
    }
  }
  CHECK_FALSE(HasMeshDurableShape("ORDERS", "worker"));
  CHECK_FALSE(HasMeshDurableShape("EVENTS", "worker"));
}

TEST_CASE("permissions: one row of the table each", "[derive]") {
  const DesiredState d = DeriveExample();

  SECTION("a node, holding roles or not") {
    const Principal& a = PrincipalOf(d, "node-a");  // holds mesh-notify
    CHECK(a.kind == PrincipalKind::kNode);
    CHECK(a.publish_allow == Strings{"$JS.ACK.DECL.decl_node-a.>",
                                     "$JS.ACK.SEAT_mesh-notify.worker.>", "mesh.control.node-a.>",
                                     "mesh.evt.mesh-notify.notified"});
    CHECK(a.subscribe_allow ==
          Strings{"_INBOX.node-a.>", "mesh.in.node-a.>", "mesh.q.mesh-notify"});
    const Principal& b = PrincipalOf(d, "node-b");  // holds mesh-build and mesh-notify
    CHECK(b.publish_allow == Strings{"$JS.ACK.DECL.decl_node-b.>",
                                     "$JS.ACK.SEAT_mesh-build.worker.>",
                                     "$JS.ACK.SEAT_mesh-notify.worker.>", "mesh.control.node-b.>",
                                     "mesh.evt.mesh-build.built", "mesh.evt.mesh-notify.notified"});
    CHECK(b.subscribe_allow == Strings{"_INBOX.node-b.>", "mesh.in.node-b.>", "mesh.q.mesh-build",
                                       "mesh.q.mesh-notify"});
    const Principal& c = PrincipalOf(d, "node-c");  // holds nothing, has no credential
    CHECK(c.publish_allow == Strings{"$JS.ACK.DECL.decl_node-c.>", "mesh.control.node-c.>"});
    CHECK(c.subscribe_allow == Strings{"_INBOX.node-c.>", "mesh.in.node-c.>"});
  }
  SECTION("a module owning its seats, using seats, following events") {
    const Principal& billing = PrincipalOf(d, "billing");
    CHECK(billing.kind == PrincipalKind::kModule);
    CHECK(billing.publish_allow ==
          Strings{"$JS.ACK.EVENTS.ev_billing_mesh-build_built.>", "$JS.ACK.SEAT_invoicer.worker.>",
                  "$JS.ACK.SEAT_ledger.worker.>", "mesh.control.billing.>",
                  "mesh.evt.invoicer.invoiced", "mesh.evt.invoicer.voided",
                  "mesh.evt.ledger.posted", "mesh.work.ledger.post", "mesh.work.mesh-build.build"});
    CHECK(billing.subscribe_allow ==
          Strings{"_INBOX.billing.>", "mesh.in.billing.>", "mesh.q.invoicer", "mesh.q.ledger"});
    const Principal& shop = PrincipalOf(d, "shop");
    CHECK(shop.publish_allow == Strings{"$JS.ACK.EVENTS.ev_shop_invoicer_invoiced.>",
                                        "$JS.ACK.EVENTS.ev_shop_ledger_posted.>",
                                        "$JS.ACK.SEAT_intake.worker.>", "mesh.control.shop.>",
                                        "mesh.evt.intake.accepted", "mesh.evt.intake.rejected",
                                        "mesh.work.invoicer.render", "mesh.work.invoicer.void",
                                        "mesh.work.mesh-notify.notify"});
    CHECK(shop.subscribe_allow == Strings{"_INBOX.shop.>", "mesh.in.shop.>", "mesh.q.intake"});
  }
  SECTION("the controller") {
    const Principal& c = PrincipalOf(d, "mesh-controller");
    CHECK(c.kind == PrincipalKind::kController);
    CHECK(c.publish_allow == Strings{"$JS.ACK.CONTROL.controller.>",
                                     "$JS.ACK.EVENTS.ev_mesh-controller_invoicer_invoiced.>",
                                     "$JS.ACK.EVENTS.ev_mesh-controller_mesh-build_built.>",
                                     "mesh.decl.node-a", "mesh.decl.node-b", "mesh.decl.node-c",
                                     "mesh.work.intake.order", "mesh.work.mesh-build.build"});
    CHECK(c.subscribe_allow == Strings{"_INBOX.mesh-controller.>", "mesh.in.mesh-controller.>"});
  }
  SECTION("the reconciler: its row only") {
    const Principal& r = PrincipalOf(d, "mesh-reconciler");
    CHECK(r.kind == PrincipalKind::kReconciler);
    CHECK(r.publish_allow == Strings{"$JS.API.>"});
    CHECK(r.subscribe_allow == Strings{"$JS.EVENT.ADVISORY.>", "_INBOX.mesh-reconciler.>"});
    CHECK(r.credential.kind == Credential::Kind::kPlain);
  }
}

TEST_CASE("principals are sorted, those without a credential are named, their objects kept",
          "[derive]") {
  const DesiredState d = DeriveExample();
  Strings users;
  for (const Principal& p : d.principals) users.push_back(p.user.str());
  CHECK(users == Strings{"billing", "mesh-controller", "mesh-reconciler", "node-a", "node-b",
                         "node-c", "shop"});
  REQUIRE(d.without_credential.size() == 1);
  CHECK(d.without_credential[0].str() == "node-c");
  CHECK(PrincipalOf(d, "node-c").credential.kind == Credential::Kind::kNone);
  CHECK(FindConsumer(d, DeclConsumer("node-c")) != nullptr);
  CHECK(PrincipalOf(d, "node-b").credential.kind == Credential::Kind::kBcrypt);
  CHECK(d.mesh == "demo");
  CHECK(d.account == "MESH");
}

TEST_CASE("API spellings and principal kinds", "[derive]") {
  CHECK(std::string(ToApi(Retention::kLimits)) == "limits");
  CHECK(std::string(ToApi(Retention::kInterest)) == "interest");
  CHECK(std::string(ToApi(Retention::kWorkQueue)) == "workqueue");
  CHECK(std::string(ToApi(Storage::kFile)) == "file");
  CHECK(std::string(ToApi(Storage::kMemory)) == "memory");
  CHECK(std::string(ToApi(Discard::kOld)) == "old");
  CHECK(std::string(ToApi(Discard::kNew)) == "new");
  CHECK(std::string(ToApi(AckPolicy::kNone)) == "none");
  CHECK(std::string(ToApi(AckPolicy::kAll)) == "all");
  CHECK(std::string(ToApi(AckPolicy::kExplicit)) == "explicit");
  CHECK(std::string(ToApi(DeliverPolicy::kAll)) == "all");
  CHECK(std::string(ToApi(DeliverPolicy::kLast)) == "last");
  CHECK(std::string(ToApi(DeliverPolicy::kNew)) == "new");
  CHECK(std::string(ToApi(DeliverPolicy::kByStartSequence)) == "by_start_sequence");
  CHECK(std::string(ToApi(DeliverPolicy::kByStartTime)) == "by_start_time");
  CHECK(std::string(ToApi(DeliverPolicy::kLastPerSubject)) == "last_per_subject");
  CHECK(std::string(ToApi(ReplayPolicy::kInstant)) == "instant");
  CHECK(std::string(ToApi(ReplayPolicy::kOriginal)) == "original");
  CHECK(std::string(ToString(PrincipalKind::kReconciler)) == "reconciler");
  CHECK(std::string(ToString(PrincipalKind::kController)) == "controller");
  CHECK(std::string(ToString(PrincipalKind::kNode)) == "node");
  CHECK(std::string(ToString(PrincipalKind::kModule)) == "module");
}

TEST_CASE("a follows entry listed twice derives one consumer and one permission", "[derive]") {
  Records r = test::Example();
  r.modules[1].follows.push_back(r.modules[1].follows[0]);
  const DesiredState twice = Derive(r, test::Reconciler());
  const DesiredState once = DeriveExample();
  CHECK(twice.consumers == once.consumers);
  CHECK(SamePrincipals(twice.principals, once.principals));
}

// --- Properties over generated meshes. ---

// Who a consumer delivers to, by the records: the follower, the node, the controller, or
// every owner of the seat.
std::map<ConsumerId, std::set<std::string>> IntendedReceivers(const Records& r) {
  std::map<ConsumerId, std::set<std::string>> out;
  out[ControlConsumer()].insert(r.controller.user);
  for (const Node& n : r.nodes) out[DeclConsumer(n.name)].insert(n.name);
  for (const FollowRef& f : r.controller.follows) {
    out[EventConsumer(r.controller.user, f)].insert(r.controller.user);
  }
  for (const Module& m : r.modules) {
    for (const Seat& s : m.seats) out[SeatWorker(s.name)].insert(m.name);
    for (const FollowRef& f : m.follows) out[EventConsumer(m.name, f)].insert(m.name);
  }
  for (const Role& role : r.roles) {
    auto& receivers = out[SeatWorker(role.seat.name)];  // may stay empty: nobody holds it
    receivers.insert(role.holders.begin(), role.holders.end());
  }
  return out;
}

void CheckProperties(const Records& r, const DesiredState& d) {
  std::set<std::string> streams;
  for (const StreamSpec& s : d.streams) {
    CHECK(streams.insert(s.name.str()).second);
    CHECK(SortedUnique(s.subjects));
  }
  for (size_t i = 1; i < d.streams.size(); ++i) CHECK(d.streams[i - 1].name < d.streams[i].name);

  std::map<std::string, const ConsumerSpec*> by_ack;
  for (size_t i = 0; i < d.consumers.size(); ++i) {
    const ConsumerSpec& c = d.consumers[i];
    if (i > 0) {
      const ConsumerSpec& prev = d.consumers[i - 1];
      CHECK(std::tie(prev.stream, prev.durable) < std::tie(c.stream, c.durable));
    }
    CHECK(streams.count(c.stream.str()) == 1);  // every consumer's stream exists
    CHECK(c.durable.str().find('.') == std::string::npos);
    CHECK(by_ack.emplace(ConsumerId{c.stream, c.durable}.AckPermission(), &c).second);
  }

  std::map<std::string, const Principal*> principals;
  for (size_t i = 0; i < d.principals.size(); ++i) {
    const Principal& p = d.principals[i];
    CHECK(principals.emplace(p.user.str(), &p).second);
    if (i > 0) CHECK(d.principals[i - 1].user < p.user);
    CHECK(SortedUnique(p.publish_allow));
    CHECK(SortedUnique(p.subscribe_allow));
    for (const std::string& subject : p.publish_allow) {
      // Every ack permission matches exactly one derived consumer (keys of by_ack are unique).
      if (subject.rfind("$JS.ACK.", 0) == 0) CHECK(by_ack.count(subject) == 1);
    }
  }

  // Every deliver subject is subscribed (literally or through a wildcard) by each intended
  // principal; exactly the intended principals may ack it.
  std::map<std::string, std::set<std::string>> ackers;
  for (const auto& [user, p] : principals) {
    for (const std::string& subject : p->publish_allow) {
      if (subject.rfind("$JS.ACK.", 0) == 0) ackers[subject].insert(user);
    }
  }
  const auto intended = IntendedReceivers(r);
  REQUIRE(intended.size() == d.consumers.size());
  for (const ConsumerSpec& c : d.consumers) {
    const ConsumerId id{c.stream, c.durable};
    INFO(c.stream.str() << "/" << c.durable.str());
    REQUIRE(intended.count(id) == 1);
    const std::set<std::string>& receivers = intended.at(id);
    CHECK(ackers[id.AckPermission()] == receivers);
    for (const std::string& user : receivers) {
      INFO(user);
      REQUIRE(principals.count(user) == 1);
      bool subscribed = false;
      for (const std::string& s : principals.at(user)->subscribe_allow) {
        subscribed = subscribed || Covers(s, c.deliver_subject);
      }
      CHECK(subscribed);
    }
  }

  Strings without;
  for (const Principal& p : d.principals) {
    if (p.credential.kind == Credential::Kind::kNone) without.push_back(p.user.str());
  }
  Strings listed;
  for (const UserName& u : d.without_credential) listed.push_back(u.str());
  CHECK(listed == without);
}

TEST_CASE("properties hold on generated meshes of several sizes and seeds", "[derive]") {
  using mesh::testing::CredentialMix;
  using mesh::testing::MeshSize;
  for (const MeshSize& base : {MeshSize::Small(), MeshSize::Medium()}) {
    for (uint64_t seed : {1, 2, 3, 7, 42}) {
      const MeshSize size = base.WithSeed(seed).WithCredentials(CredentialMix::kMixed);
      INFO("nodes " << size.nodes << " seed " << seed);
      const Records generated = mesh::testing::GenerateMesh(size);
      // The generator's records are valid, and their JSON form parses back to the same mesh.
      const Records parsed = test::ParseOrFail(mesh::testing::ToJson(generated));
      const DesiredState d = Derive(parsed, test::Reconciler());
      const DesiredState direct = Derive(generated, test::Reconciler());
      CHECK(d.streams == direct.streams);
      CHECK(d.consumers == direct.consumers);
      CHECK(SamePrincipals(d.principals, direct.principals));
      CHECK(d.without_credential == direct.without_credential);
      CheckProperties(parsed, d);
      // Deterministic: the same records derive the same state.
      CHECK(DesiredToJson(Derive(parsed, test::Reconciler())) == DesiredToJson(d));
    }
  }
}

TEST_CASE("the large mesh has the sizes the issue quotes", "[derive]") {
  const Records r = mesh::testing::GenerateMesh(mesh::testing::MeshSize::Large());
  const DesiredState d = Derive(r, test::Reconciler());
  CHECK(d.streams.size() == 623);
  CHECK(d.consumers.size() == 3526);
  CHECK(d.principals.size() == 2302);
  CheckProperties(r, d);
}

}  // namespace
}  // namespace mesh::model
