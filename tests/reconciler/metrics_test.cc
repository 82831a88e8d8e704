// The daemon's metrics: names, labels, bounded series, what a pass records, and the text
// format as promtool checks it.
#include "reconciler/metrics.h"

#include <catch2/catch.hpp>
#include <initializer_list>

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
  Metrics metrics("1.2.3");
  const std::string text = metrics.Serialize();
  for (const char* kind : {"users_file", "stream", "consumer"}) {
    for (const char* state : {"missing", "differs", "unexpected"}) {
      INFO(kind << " " << state);
      CHECK(Has(text, std::string("mesh_drift_objects{kind=\"") + kind + "\",state=\"" + state +
                          "\"} 0"));
    }
  }
  CheckHasAll(
      text, {"mesh_reconciler_build_info{version=\"1.2.3\"} 1", "mesh_reconciler_lease_holder 1",
             "mesh_reconciler_held 0", "mesh_bus_connected 0", "mesh_records_valid 0",
             "mesh_reconcile_exceptions_total 0", "mesh_reconcile_last_success_timestamp_seconds 0",
             "mesh_users_file_reloads_total{result=\"success\"} 0",
             "mesh_users_file_reloads_total{result=\"failure\"} 0",
             "# TYPE mesh_reconcile_duration_seconds histogram"});
  // Absent until known.
  CHECK_FALSE(Has(text, "mesh_bus_certificate_expiry_timestamp_seconds"));
}

TEST_CASE("A pass records drift, repairs, reloads, duration and success", "[metrics]") {
  Metrics metrics("test");
  metrics.RecordPass(BusyPass(), 1700000000.5);
  const std::string text = metrics.Serialize();
  CheckHasAll(text, {"mesh_drift_objects{kind=\"stream\",state=\"missing\"} 2",
                     "mesh_drift_objects{kind=\"consumer\",state=\"unexpected\"} 1",
                     "mesh_drift_objects{kind=\"users_file\",state=\"differs\"} 1",
                     "mesh_drift_objects{kind=\"consumer\",state=\"missing\"} 0",
                     "mesh_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"} 2",
                     "mesh_repairs_total{action=\"update\",kind=\"consumer\",result=\"failure\"} 1",
                     "mesh_repairs_total{action=\"create\",kind=\"consumer\",result=\"skipped\"} 1",
                     "mesh_users_file_reloads_total{result=\"success\"} 1",
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

TEST_CASE("A pass that could not observe leaves the drift gauges alone", "[metrics]") {
  Metrics metrics("test");
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
  Metrics metrics("test");
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
  Metrics metrics("0.1.0");
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
