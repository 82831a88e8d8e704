// The pass's own logic on an in-memory bus (tests/support/memory_observer.h): what it plans from
// what it observes, where it stops, what it repairs when the bus cannot be observed. No server
// runs here; how a server answers is pass_test.cc's and the observers' tests'.
#include <algorithm>
#include <catch2/catch.hpp>
#include <memory>
#include <string>

#include "model/records.h"
#include "observers/users_file.h"
#include "reconciler/pass/pass.h"
#include "tests/support/memory_observer.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using test::MemoryMesh;

// The account as the reconciler would have made it, less `gone` and its consumers.
observers::ObservedJetStream AsDesiredWithout(const model::DesiredState& desired,
                                              const StreamName& gone) {
  observers::ObservedJetStream account = mesh::testing::ConvergedObservation(desired, "").jetstream;
  std::erase_if(account.streams, [&](const auto& s) { return s.config.name == gone; });
  std::erase_if(account.consumers, [&](const auto& c) { return c.config.stream == gone; });
  return account;
}

bool HasDrift(const std::vector<DriftEntry>& drift, ObjectKind kind, const std::string& name,
              Remedy remedy) {
  return std::any_of(drift.begin(), drift.end(), [&](const DriftEntry& e) {
    return e.kind == kind && e.name == name && e.remedy == remedy;
  });
}

TEST_CASE("an account as desired: the pass plans nothing and is converged", "[pass][memory]") {
  MemoryMesh mesh;
  mesh.observer->SetAccountAsDesired(mesh.desired);
  Reconciler reconciler = mesh.Make();
  for (uint64_t pass = 1; pass <= 2; ++pass) {
    const PassReport report = reconciler.RunPass(pass, Trigger::kPeriodic, ApplyMode::kApply);
    INFO(report.status.ToString());
    CHECK(report.status.ok());
    CHECK(report.plan.drift.empty());
    CHECK(report.outcomes.empty());
    CHECK(report.converged());
  }
  CHECK(mesh.observer->account_listings() == 2);  // once per pass: nothing to observe again
}

TEST_CASE("a drifted account: observing only names each difference and changes nothing",
          "[pass][memory]") {
  MemoryMesh mesh;
  REQUIRE(mesh.desired.streams.size() >= 2);
  REQUIRE(!mesh.desired.consumers.empty());
  // A stream deleted with its consumers, a consumer changed in a field updated in place, and a
  // stream carrying the mark that the records no longer hold.
  const StreamName gone = mesh.desired.streams.front().name;
  observers::ObservedJetStream account = AsDesiredWithout(mesh.desired, gone);
  auto changed = std::find_if(account.consumers.begin(), account.consumers.end(),
                              [&](const auto& c) { return c.config.stream != gone; });
  REQUIRE(changed != account.consumers.end());
  changed->config.max_deliver = 77;
  const std::string changed_name =
      changed->config.stream.str() + "/" + changed->config.durable.str();
  observers::ObservedStream leftover = account.streams.front();
  leftover.config.name = StreamName("LEFTOVER");
  leftover.config.subjects = {"leftover.>"};
  account.streams.insert(account.streams.begin(), leftover);
  mesh.observer->SetAccount(account);

  const PassReport report = mesh.Make().RunPass(1, Trigger::kOnce, ApplyMode::kObserveOnly);
  INFO(report.status.ToString());
  REQUIRE(report.status.ok());
  CHECK(HasDrift(report.plan.drift, ObjectKind::kStream, gone.str(), Remedy::kCreate));
  for (const model::ConsumerSpec& c : mesh.desired.consumers) {
    if (c.stream != gone) continue;
    CHECK(HasDrift(report.plan.drift, ObjectKind::kConsumer, c.stream.str() + "/" + c.durable.str(),
                   Remedy::kCreate));
  }
  CHECK(HasDrift(report.plan.drift, ObjectKind::kConsumer, changed_name, Remedy::kUpdateInPlace));
  CHECK(HasDrift(report.plan.drift, ObjectKind::kStream, "LEFTOVER", Remedy::kLeave));
  CHECK(report.outcomes.empty());
  CHECK(report.remaining == report.plan.drift);
  CHECK_FALSE(report.converged());
  // The advisory scope: what the records desire and what carries the mark, not the others.
  REQUIRE(report.advisory_scope);
  CHECK(report.advisory_scope->streams.count(gone.str()));
  CHECK(report.advisory_scope->streams.count("LEFTOVER"));
  CHECK(mesh.observer->account().streams.size() == account.streams.size());  // nothing written
}

TEST_CASE("records invalid: the last valid records are kept, and with none ever valid no plan",
          "[pass][memory]") {
  MemoryMesh mesh;
  mesh.observer->SetAccountAsDesired(mesh.desired);
  Reconciler reconciler = mesh.Make();
  REQUIRE(reconciler.RunPass(1, Trigger::kPeriodic, ApplyMode::kApply).converged());
  mesh::testing::WriteFile(mesh.settings.records_path, "{ \"version\": 2 }");
  const PassReport report = reconciler.RunPass(2, Trigger::kPeriodic, ApplyMode::kApply);
  CHECK(report.status.ok());
  CHECK_FALSE(report.records_valid);
  CHECK_FALSE(report.records_errors.empty());
  CHECK(report.plan.drift.empty());  // planned from the last valid records, as converged

  Reconciler fresh = mesh.Make();
  const int attempts_before = mesh.observer->connect_attempts();
  const int listings_before = mesh.observer->account_listings();
  const PassReport never = fresh.RunPass(1, Trigger::kStart, ApplyMode::kApply);
  CHECK(never.status.code() == Errc::kInvalidArgument);
  CHECK_FALSE(never.records_valid);
  CHECK(never.plan.drift.empty());
  CHECK(mesh.observer->connect_attempts() == attempts_before);  // not even connected
  CHECK(mesh.observer->account_listings() == listings_before);
}

TEST_CASE("replicas above a standalone server: unsatisfiable, nothing applied", "[pass][memory]") {
  std::string json = test::ExampleRecordsJson();
  const std::string one = "\"replicas\": 1";
  REQUIRE(json.find(one) != std::string::npos);
  json.replace(json.find(one), one.size(), "\"replicas\": 3");
  MemoryMesh mesh(MemoryMesh::UsersFile::kNotManaged, json);
  const PassReport report = mesh.Make().RunPass(1, Trigger::kOnce, ApplyMode::kApply);
  INFO(report.status.ToString());
  REQUIRE(report.status.ok());
  CHECK(report.plan.problems ==
        std::vector<std::string>{"records ask for 3 replicas, the JetStream cluster has 1 server"});
  CHECK(report.remaining_problems == report.plan.problems);
  CHECK(report.outcomes.empty());
  REQUIRE_FALSE(report.plan.drift.empty());
  for (const DriftEntry& e : report.plan.drift) CHECK(e.remedy == Remedy::kUnsatisfiable);
  CHECK_FALSE(report.converged());
  CHECK(mesh.observer->account_listings() == 1);  // nothing applied, nothing observed again
}

TEST_CASE("a server not ready: no listing, no plan of the bus, the users file repaired alone",
          "[pass][memory]") {
  MemoryMesh mesh(MemoryMesh::UsersFile::kManaged);
  observers::ObservedServer server;
  server.monitor_configured = true;
  server.reachable = true;
  server.ready = false;
  server.not_ready_reason = "JetStream is still recovering its store";
  mesh.observer->SetServer(server);
  const PassReport report = mesh.Make().RunPass(1, Trigger::kPeriodic, ApplyMode::kApply);
  CHECK(report.status.code() == Errc::kUnavailable);
  CHECK(report.status.message() == "server not ready: JetStream is still recovering its store");
  CHECK(report.readiness == ServerReadiness::kNotReady);
  CHECK(mesh.observer->account_listings() == 0);
  // The users file is ours and local: written although the server cannot be planned.
  for (const DriftEntry& e : report.plan.drift) CHECK(e.kind == ObjectKind::kUsersFile);
  REQUIRE_FALSE(report.outcomes.empty());
  CHECK(report.outcomes.front().action.kind == ActionKind::kWriteUsersFile);
  CHECK(report.outcomes.front().outcome == Outcome::kDone);
  const observers::ObservedUsersFile file = observers::ObserveUsersFile(mesh.settings.users_file);
  REQUIRE(file.state == observers::ObservedUsersFile::State::kPresent);
  CHECK(file.bytes.find(test::kReconcilerUser) != std::string::npos);
}

TEST_CASE("a listing that fails fails the pass, and the users file is still repaired alone",
          "[pass][memory]") {
  MemoryMesh mesh(MemoryMesh::UsersFile::kManaged);
  mesh.observer->SetAccountError(Status(Errc::kUnavailable, "connection lost"));
  const PassReport report = mesh.Make().RunPass(1, Trigger::kPeriodic, ApplyMode::kApply);
  CHECK(report.status.code() == Errc::kUnavailable);
  CHECK(report.status.message() == "connection lost");
  CHECK(report.readiness == ServerReadiness::kReady);  // a failure, not a wait
  REQUIRE_FALSE(report.outcomes.empty());
  CHECK(report.outcomes.front().action.kind == ActionKind::kWriteUsersFile);
  CHECK(report.outcomes.front().outcome == Outcome::kDone);
  CHECK_FALSE(report.converged());
}

TEST_CASE("a refused connection: one attempt per pass, no listing", "[pass][memory]") {
  MemoryMesh mesh;
  mesh.observer->SetConnectResult(Status(Errc::kRefused, "authorization violation"));
  Reconciler reconciler = mesh.Make();
  for (uint64_t pass = 1; pass <= 3; ++pass) {
    const PassReport report = reconciler.RunPass(pass, Trigger::kPeriodic, ApplyMode::kApply);
    CHECK(report.status.code() == Errc::kRefused);
    CHECK(mesh.observer->connect_attempts() == static_cast<int>(pass));
  }
  CHECK(mesh.observer->account_listings() == 0);
}

TEST_CASE("objects the server reports unhealthy are in the report, the others planned as usual",
          "[pass][memory]") {
  MemoryMesh mesh;
  mesh.observer->SetAccountAsDesired(mesh.desired);
  observers::ObservedServer server;
  server.monitor_configured = true;
  server.reachable = true;
  server.ready = true;
  server.jetstream_cluster_size = 1;
  observers::ObjectHealth foreign;
  foreign.kind = observers::ObjectHealth::Kind::kStream;
  foreign.account = "$G";
  foreign.stream = "FOREIGN";
  foreign.error = "JetStream stream '$G > FOREIGN' could not be recovered";
  server.unhealthy = {foreign};
  mesh.observer->SetServer(server);
  observers::ObservedJetStream account = mesh.observer->account();
  account.undescribed.push_back({StreamName("OTHER"), ConsumerName(), "offline"});
  mesh.observer->SetAccount(account);

  const PassReport report = mesh.Make().RunPass(1, Trigger::kPeriodic, ApplyMode::kApply);
  REQUIRE(report.status.ok());
  REQUIRE(report.unhealthy.size() == 2);
  CHECK(report.unhealthy[0] == foreign);
  CHECK(report.unhealthy[1].stream == "OTHER");
  CHECK(report.unhealthy[1].error == "stream OTHER: offline");
  CHECK(report.plan.drift.empty());
  CHECK(report.outcomes.empty());
}

TEST_CASE("plan with a users file that proves nothing hashes nothing and says what it left",
          "[pass][memory]") {
  MemoryMesh mesh(MemoryMesh::UsersFile::kManaged);
  mesh.observer->SetAccountAsDesired(mesh.desired);
  const int64_t plain = std::count_if(
      mesh.desired.principals.begin(), mesh.desired.principals.end(),
      [](const auto& p) { return p.credential.kind == model::Credential::Kind::kPlain; });
  REQUIRE(plain > 0);
  const PassReport report = mesh.Make().RunPass(1, Trigger::kOnce, ApplyMode::kObserveOnly);
  INFO(report.status.ToString());
  REQUIRE(report.status.ok());
  CHECK(report.passwords_hashed == 0);
  REQUIRE(report.plan.drift.size() == 1);  // the account is as desired: only the file differs
  const DriftEntry& file = report.plan.drift.front();
  CHECK(file.kind == ObjectKind::kUsersFile);
  CHECK(file.remedy == Remedy::kRewrite);
  CHECK(file.note.find(std::to_string(plain) +
                       " password(s) not proven by the file, left unhashed by plan") !=
        std::string::npos);
  CHECK(report.outcomes.empty());
  CHECK(observers::ObserveUsersFile(mesh.settings.users_file).state ==
        observers::ObservedUsersFile::State::kAbsent);  // plan writes nothing
}

TEST_CASE("the observation after apply fails: the pass fails, and what was planned remains",
          "[pass][memory]") {
  MemoryMesh mesh;
  const StreamName gone = mesh.desired.streams.front().name;
  mesh.observer->SetAccount(AsDesiredWithout(mesh.desired, gone));
  mesh.observer->SetAccountError(Status(Errc::kUnavailable, "connection lost"), 2);
  const PassReport report = mesh.Make().RunPass(1, Trigger::kPeriodic, ApplyMode::kApply);
  CHECK(report.status.code() == Errc::kUnavailable);
  CHECK(report.status.message() == "observing after apply: connection lost");
  CHECK(mesh.observer->account_listings() == 2);
  REQUIRE_FALSE(report.plan.drift.empty());
  CHECK(HasDrift(report.plan.drift, ObjectKind::kStream, gone.str(), Remedy::kCreate));
  CHECK_FALSE(report.outcomes.empty());  // tried (and failed here: the in-memory bus has none)
  CHECK(report.remaining == report.plan.drift);
  CHECK(report.remaining_problems == report.plan.problems);
  CHECK_FALSE(report.converged());
}

}  // namespace
}  // namespace mesh::reconciler
