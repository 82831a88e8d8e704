// The daemon's metrics: names, labels, bounded series, what a pass records, and the text
// format as promtool checks it.
#include "reconciler/metrics.h"

#include <catch2/catch.hpp>
#include <ctime>
#include <initializer_list>
#include <optional>

#include "reconciler/process_metrics.h"
#include "tests/reconciler/daemon_support.h"

namespace mesh::reconciler::test {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

// Checks that `text` holds every one of `lines`, naming the one it lacks.
void CheckHasAll(const std::string& text, std::initializer_list<const char*> lines) {
  for (const char* line : lines) {
    INFO(line);
    CHECK(Has(text, line));
  }
}

DriftEntry Drift(ObjectKind kind, DriftState state, std::string name) {
  DriftEntry entry;
  entry.kind = kind;
  entry.state = state;
  entry.name = std::move(name);
  return entry;
}

ActionOutcome OutcomeOf(ActionKind kind, Outcome outcome) {
  ActionOutcome result;
  result.action.kind = kind;
  result.action.name = "SEAT_secret-name";
  result.outcome = outcome;
  return result;
}

PassReport BusyPass() {
  PassReport report;
  report.pass_id = 7;
  report.trigger = Trigger::kAdvisory;
  report.records_valid = true;
  report.duration_seconds = 0.042;
  report.remaining = {Drift(ObjectKind::kStream, DriftState::kMissing, "SEAT_a"),
                      Drift(ObjectKind::kStream, DriftState::kMissing, "SEAT_b"),
                      Drift(ObjectKind::kConsumer, DriftState::kUnexpected, "SEAT_a/extra"),
                      Drift(ObjectKind::kUsersFile, DriftState::kDiffers, "/etc/nats/users.conf")};
  report.outcomes = {OutcomeOf(ActionKind::kCreateStream, Outcome::kDone),
                     OutcomeOf(ActionKind::kCreateStream, Outcome::kDone),
                     OutcomeOf(ActionKind::kUpdateConsumer, Outcome::kRefused),
                     OutcomeOf(ActionKind::kCreateConsumer, Outcome::kSkipped),
                     OutcomeOf(ActionKind::kWriteUsersFile, Outcome::kDone),
                     OutcomeOf(ActionKind::kReloadServer, Outcome::kFailed)};
  return report;
}

TEST_CASE("A fresh registry has every fixed series", "[metrics]") {
  Metrics metrics("1.2.3", "0123456789ab");
  const std::string text = metrics.Serialize();
  for (const char* kind : {"users_file", "stream", "consumer"}) {
    for (const char* state : {"missing", "differs", "unexpected"}) {
      INFO(kind << " " << state);
      CHECK(Has(text, std::string("mesh_drift_objects{kind=\"") + kind + "\",state=\"" + state +
                          "\"} 0"));
    }
  }
  CheckHasAll(
      text,
      {"mesh_reconciler_build_info{commit=\"0123456789ab\",version=\"1.2.3\"} 1",
       "mesh_reconciler_lease_holder 1", "mesh_reconciler_held 0", "mesh_bus_connected 0",
       "mesh_records_valid 0", "mesh_reconcile_exceptions_total 0",
       "mesh_reconcile_last_success_timestamp_seconds 0",
       "mesh_users_file_reloads_total{result=\"success\"} 0",
       "mesh_users_file_reloads_total{result=\"failure\"} 0",
       "mesh_users_file_writes_total{result=\"success\"} 0",
       "mesh_users_file_writes_total{result=\"failure\"} 0",
       "# TYPE mesh_reconcile_duration_seconds histogram",
       // The standard process metrics, read from /proc.
       "# TYPE process_cpu_seconds_total counter", "# TYPE process_resident_memory_bytes gauge",
       "# TYPE process_virtual_memory_bytes gauge", "# TYPE process_start_time_seconds gauge",
       "# TYPE process_open_fds gauge", "# TYPE process_max_fds gauge"});
  // Absent until known.
  CHECK_FALSE(Has(text, "mesh_bus_certificate_expiry_timestamp_seconds"));
}

TEST_CASE("With a lease, an instance is no holder until a round says so", "[metrics]") {
  // Counted as a holder from the start, every pod starting beside the real holder made the sum
  // 2 (MeshLeaseHoldersNotOne) until its first pass ended.
  Metrics metrics("test", "abc123", LeaseMode::kKv);
  CHECK(Has(metrics.Serialize(), "mesh_reconciler_lease_holder 0"));
  metrics.SetLeaseHolder(true);
  CHECK(Has(metrics.Serialize(), "mesh_reconciler_lease_holder 1"));
}

TEST_CASE("A pass records drift, repairs, reloads, duration and success", "[metrics]") {
  Metrics metrics("test", "abc123");
  metrics.RecordPass(BusyPass(), 1700000000.5);
  const std::string text = metrics.Serialize();
  CheckHasAll(text, {"mesh_drift_objects{kind=\"stream\",state=\"missing\"} 2",
                     "mesh_drift_objects{kind=\"consumer\",state=\"unexpected\"} 1",
                     "mesh_drift_objects{kind=\"users_file\",state=\"differs\"} 1",
                     "mesh_drift_objects{kind=\"consumer\",state=\"missing\"} 0",
                     "mesh_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"} 2",
                     "mesh_repairs_total{action=\"update\",kind=\"consumer\",result=\"failure\"} 1",
                     "mesh_repairs_total{action=\"create\",kind=\"consumer\",result=\"skipped\"} 1",
                     // The write succeeded, the reload failed: counted apart.
                     "mesh_users_file_writes_total{result=\"success\"} 1",
                     "mesh_users_file_writes_total{result=\"failure\"} 0",
                     "mesh_users_file_reloads_total{result=\"success\"} 0",
                     "mesh_users_file_reloads_total{result=\"failure\"} 1",
                     // A refused action makes the pass a failure: no success time.
                     "mesh_reconcile_passes_total{result=\"failure\",trigger=\"advisory\"} 1",
                     "mesh_reconcile_last_success_timestamp_seconds 0",
                     "mesh_reconcile_duration_seconds_count 1", "mesh_records_valid 1"});
  // No per-object label: names of streams never appear.
  CHECK_FALSE(Has(text, "SEAT_"));
  CHECK_FALSE(Has(text, "users.conf"));

  PassReport converged;
  converged.trigger = Trigger::kPeriodic;
  converged.records_valid = true;
  metrics.RecordPass(converged, 1700000100.25);
  const std::string after = metrics.Serialize();
  CheckHasAll(after, {"mesh_drift_objects{kind=\"stream\",state=\"missing\"} 0",
                      "mesh_reconcile_passes_total{result=\"success\",trigger=\"periodic\"} 1",
                      "mesh_reconcile_last_success_timestamp_seconds 1700000100.25",
                      "mesh_reconcile_duration_seconds_count 2"});
}

TEST_CASE("A failed write is a failed write, and the reload it skipped counts as nothing",
          "[metrics]") {
  Metrics metrics("test", "abc123");
  PassReport report;
  report.trigger = Trigger::kUsersFileChanged;
  report.outcomes = {OutcomeOf(ActionKind::kWriteUsersFile, Outcome::kFailed),
                     OutcomeOf(ActionKind::kReloadServer, Outcome::kSkipped)};
  metrics.RecordPass(report, 1);
  CheckHasAll(metrics.Serialize(), {"mesh_users_file_writes_total{result=\"failure\"} 1",
                                    "mesh_users_file_writes_total{result=\"success\"} 0",
                                    "mesh_users_file_reloads_total{result=\"failure\"} 0",
                                    "mesh_users_file_reloads_total{result=\"success\"} 0"});
}

TEST_CASE("Process metrics are this process's own figures", "[metrics]") {
  const auto families = CollectProcessMetrics();
  auto value = [&](const std::string& name) -> std::optional<double> {
    for (const auto& family : families) {
      if (family.name == name && family.metric.size() == 1) {
        return family.type == prometheus::MetricType::Counter ? family.metric[0].counter.value
                                                              : family.metric[0].gauge.value;
      }
    }
    return std::nullopt;
  };
  const auto rss = value("process_resident_memory_bytes");
  const auto vsize = value("process_virtual_memory_bytes");
  const auto start = value("process_start_time_seconds");
  const auto open = value("process_open_fds");
  REQUIRE(rss);
  REQUIRE(vsize);
  REQUIRE(start);
  REQUIRE(open);
  REQUIRE(value("process_cpu_seconds_total"));
  REQUIRE(value("process_max_fds"));
  CHECK(*rss > 1024 * 1024);  // a test binary with Catch2 and cnats linked holds more than 1 MiB
  CHECK(*vsize >= *rss);
  // Started after 2020 and not in the future.
  CHECK(*start > 1577836800);
  CHECK(*start <= static_cast<double>(std::time(nullptr)) + 1);
  CHECK(*open >= 3);  // stdin, stdout, stderr at least
}

TEST_CASE("/proc/<pid>/stat is parsed after the command name, whatever it holds", "[metrics]") {
  // Fields 14, 15 (utime, stime), 22 (start), 23 (vsize), 24 (rss); the name has ") (" in it.
  const std::string line =
      "4242 (odd ) (name) S 1 4242 4242 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 "
      "123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
  const auto stat = ParseProcStat(line);
  REQUIRE(stat);
  CHECK(stat->utime_ticks == 25);
  CHECK(stat->stime_ticks == 7);
  CHECK(stat->start_ticks_after_boot == 123456);
  CHECK(stat->vsize_bytes == 987654321);
  CHECK(stat->rss_pages == 2048);
  CHECK_FALSE(ParseProcStat("4242 (truncated) S 1 2 3"));
  CHECK_FALSE(ParseProcStat("no parenthesis"));
  CHECK(ParseBootTime("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n") == 1700000000u);
  CHECK_FALSE(ParseBootTime("cpu 1 2 3\n"));
}

TEST_CASE("A pass that could not observe leaves the drift gauges alone", "[metrics]") {
  Metrics metrics("test", "abc123");
  metrics.RecordPass(BusyPass(), 1);
  PassReport failed;
  failed.trigger = Trigger::kRetry;
  failed.status = Status(Errc::kUnavailable, "bus unreachable");
  failed.records_valid = true;
  metrics.RecordPass(failed, 2);
  const std::string text = metrics.Serialize();
  CheckHasAll(text, {"mesh_drift_objects{kind=\"stream\",state=\"missing\"} 2",
                     "mesh_reconcile_passes_total{result=\"failure\",trigger=\"retry\"} 1"});
}

TEST_CASE("Gauges for the bus, the hold and the certificate", "[metrics]") {
  Metrics metrics("test", "abc123");
  metrics.SetBusConnected(true);
  metrics.SetHeld(true);
  metrics.RecordException();
  metrics.SetCertificateExpiry(std::nullopt);
  CHECK_FALSE(Has(metrics.Serialize(), "mesh_bus_certificate_expiry_timestamp_seconds"));
  metrics.SetCertificateExpiry(1893456000);
  const std::string text = metrics.Serialize();
  CheckHasAll(
      text, {"mesh_bus_connected 1", "mesh_reconciler_held 1", "mesh_reconcile_exceptions_total 1",
             "mesh_bus_certificate_expiry_timestamp_seconds 1893456000"});
}

TEST_CASE("The metrics text passes promtool check metrics", "[metrics]") {
  Metrics metrics("0.1.0", "abc123");
  metrics.RecordPass(BusyPass(), 1700000000);
  metrics.SetCertificateExpiry(1893456000);
  metrics.SetBusConnected(true);
  const CliResult checked = Promtool(metrics.Serialize());
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK(checked.output.empty());  // no lint warning either
}

}  // namespace
}  // namespace mesh::reconciler::test
