// Two writers on one bus: two daemons without --lease whose records differ in one field
// (issue 38 item 5: 1,586 and 1,584 repairs in 30 s, nothing logged). The real binary against
// a real nats-server; every process stopped by PID.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>
#include <thread>

#include "reconciler/plan/contest.h"
#include "tests/support/daemon_support.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler::test {
namespace {

using mesh::testing::WaitFor;
using std::chrono::seconds;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string WithMaxAge(const std::string& records, const std::string& seconds_value) {
  const std::string from = "\"events_max_age_seconds\": 604800";
  const size_t at = records.find(from);
  REQUIRE(at != std::string::npos);
  return std::string(records).replace(at, from.size(),
                                      "\"events_max_age_seconds\": " + seconds_value);
}

TEST_CASE("Two daemons whose records differ make a few updates, back off, and say why",
          "[daemon][integration][server]") {
  LiveMesh mesh(ExampleRecordsJson());
  const Settings s = mesh.PassSettings();
  const std::string other_records = mesh.dir + "/other-records.json";
  mesh::testing::WriteFile(other_records, WithMaxAge(ExampleRecordsJson(), "86400"));
  const std::vector<std::string> env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                        kReconcilerPassword};
  // The first keeps the users file; the second only JetStream (its users file would be the same).
  auto a = DaemonProcess::Start(
      {"--records", s.records_path, "--bus", s.bus.urls[0], "--user", s.bus.user, "--users-file",
       s.users_file, "--pid-file", s.pid_file, "--monitor", s.monitor_url, "--bcrypt-cost",
       std::to_string(kCheapCost), "--interval", "2s"},
      env);
  REQUIRE(WaitFor([&] { return a->Metric("mesh_reconciler_records_valid").value_or(0) == 1; }));
  REQUIRE(WaitFor([&] {
    return a->log().find("action=create_stream name=EVENTS outcome=done") != std::string::npos;
  }));
  const auto start = std::chrono::steady_clock::now();
  auto b = DaemonProcess::Start(
      {"--records", other_records, "--bus", s.bus.urls[0], "--user", s.bus.user, "--bcrypt-cost",
       std::to_string(kCheapCost), "--interval", "2s"},
      env);

  // Each says why, once per contest: the field, its value and the other's.
  const std::string contested = "msg=\"contested: another writer changed back";
  const bool both = WaitFor(
      [&] {
        return a->log().find(contested) != std::string::npos &&
               b->log().find(contested) != std::string::npos;
      },
      seconds(40));
  // Measured over 25 s from the second daemon's start (a measurement, not a synchronisation).
  constexpr auto kMeasured = seconds(25);
  std::this_thread::sleep_until(start + kMeasured);
  const std::string log_a = a->log();
  const std::string log_b = b->log();
  INFO("A:\n" << log_a.substr(log_a.size() > 6000 ? log_a.size() - 6000 : 0));
  INFO("B:\n" << log_b.substr(log_b.size() > 6000 ? log_b.size() - 6000 : 0));
  REQUIRE(both);
  for (const std::string* log : {&log_a, &log_b}) {
    const size_t at = log->find(contested);
    const std::string line = log->substr(at, log->find('\n', at) - at);
    CHECK(line.find("kind=stream") != std::string::npos);
    CHECK(line.find("object=EVENTS") != std::string::npos);
    CHECK(line.find("fields=max_age") != std::string::npos);
    CHECK(line.find("ours=") != std::string::npos);
    CHECK(line.find("found=") != std::string::npos);
    CHECK(line.find("backoff_ms=") != std::string::npos);
  }
  // The bound: each daemon updates once when it first finds the other's value, then at most once
  // per expired backoff (10 s, 20 s, ...: within 25 s at most two), so at most 3 each, 6 in all
  // (a fight ran to ~1,300 each before). The contests are counted.
  const std::string update = "action=update_stream name=EVENTS outcome=done";
  const size_t updates = Count(log_a, update) + Count(log_b, update);
  INFO("updates: " << updates);
  CHECK(updates >= 2);
  CHECK(updates <= 6);
  CHECK(a->Metric("mesh_reconciler_contests_total{kind=\"stream\"}").value_or(0) >= 1);
  CHECK(b->Metric("mesh_reconciler_contests_total{kind=\"stream\"}").value_or(0) >= 1);
  const double contested_now = a->Metric("mesh_reconciler_contested_objects").value_or(-1) +
                               b->Metric("mesh_reconciler_contested_objects").value_or(-1);
  CHECK(contested_now >= 1);
  CHECK(b->Terminate(seconds(10)) == 0);
  CHECK(a->Terminate(seconds(10)) == 0);
}

}  // namespace
}  // namespace mesh::reconciler::test
