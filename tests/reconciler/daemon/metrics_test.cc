// The daemon's metrics: names, labels, bounded series, what a pass records, and the text
// format as promtool checks it.
#include "reconciler/daemon/metrics.h"

#include <catch2/catch.hpp>
#include <ctime>
#include <initializer_list>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "reconciler/daemon/process_metrics.h"
#include "tests/support/daemon_support.h"

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

// The samples of family `family` in the exposition `text`, each with the family's name cut off
// ("{labels} value", or "_bucket{le=...} value" and the like for a histogram), in order.
std::vector<std::string> SamplesOf(const std::string& text, std::string_view family) {
  std::vector<std::string> samples;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string series = line.substr(0, line.find_first_of("{ "));
    for (const std::string suffix : {"", "_bucket", "_sum", "_count"}) {
      if (series == std::string(family) + suffix) {
        samples.push_back(line.substr(family.size()));
        break;
      }
    }
  }
  return samples;
}

// The text after "# <kind> <family> " (kind HELP or TYPE), nullopt without such a line.
std::optional<std::string> CommentOf(const std::string& text, const std::string& kind,
                                     std::string_view family) {
  const std::string head = "# " + kind + " " + std::string(family) + " ";
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, head.size(), head) == 0) return line.substr(head.size());
  }
  return std::nullopt;
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
      CHECK(Has(text, std::string("mesh_reconciler_drift_objects{kind=\"") + kind + "\",state=\"" +
                          state + "\"} 0"));
    }
  }
  CheckHasAll(
      text,
      {"mesh_reconciler_build_info{commit=\"0123456789ab\",version=\"1.2.3\"} 1",
       "mesh_reconciler_lease_holder 1", "mesh_reconciler_held 0",
       "mesh_reconciler_bus_connected 0", "mesh_reconciler_records_valid 0",
       "mesh_reconciler_exceptions_total 0", "mesh_reconciler_last_success_timestamp_seconds 0",
       "mesh_reconciler_bus_lane_open_failures_total 0",
       "mesh_reconciler_users_file_reloads_total{result=\"success\"} 0",
       "mesh_reconciler_users_file_reloads_total{result=\"failure\"} 0",
       "mesh_reconciler_users_file_writes_total{result=\"success\"} 0",
       "mesh_reconciler_users_file_writes_total{result=\"failure\"} 0",
       "mesh_reconciler_reload_signals_refused_total{reason=\"stale\"} 0",
       "mesh_reconciler_reload_signals_refused_total{reason=\"foreign\"} 0",
       "# TYPE mesh_reconciler_pass_duration_seconds histogram",
       // The standard process metrics, read from /proc.
       "# TYPE process_cpu_seconds_total counter", "# TYPE process_resident_memory_bytes gauge",
       "# TYPE process_virtual_memory_bytes gauge", "# TYPE process_start_time_seconds gauge",
       "# TYPE process_open_fds gauge", "# TYPE process_max_fds gauge"});
  // Absent until known.
  CHECK_FALSE(Has(text, "mesh_reconciler_bus_certificate_expiry_timestamp_seconds"));
}

// Counters exist from the start, each known label set at 0: a rate() over a counter without
// series reads "no data" on a dashboard until the first pass or repair, which is not "none".
TEST_CASE("A fresh registry has every counter's known series at 0", "[metrics]") {
  Metrics metrics("1.2.3", "0123456789ab");
  const std::string text = metrics.Serialize();
  for (const char* family : {"mesh_reconciler_passes_total", "mesh_reconcile_passes_total"}) {
    for (const char* trigger :
         {"start", "periodic", "advisory", "reconnect", "records_changed", "users_file_changed",
          "forced", "retry", "lease_acquired", "repair"}) {
      for (const char* result : {"success", "failure", "waiting"}) {
        const std::string line =
            std::string(family) + "{result=\"" + result + "\",trigger=\"" + trigger + "\"} 0";
        INFO(line);
        CHECK(Has(text, line));
      }
    }
  }
  const std::vector<std::pair<const char*, const char*>> actions = {
      {"users_file", "write"}, {"users_file", "reload"}, {"stream", "create"},
      {"stream", "update"},    {"stream", "delete"},     {"consumer", "create"},
      {"consumer", "update"},  {"consumer", "delete"}};
  for (const auto& [kind, action] : actions) {
    for (const char* result : {"success", "skipped", "failure"}) {
      const std::string line = std::string("mesh_reconciler_repairs_total{action=\"") + action +
                               "\",kind=\"" + kind + "\",result=\"" + result + "\"} 0";
      INFO(line);
      CHECK(Has(text, line));
    }
  }
  // The CLI's trigger is never a daemon's.
  CHECK_FALSE(Has(text, "trigger=\"once\""));
  CheckHasAll(text, {"mesh_reconciler_contests_total{kind=\"stream\"} 0",
                     "mesh_reconciler_contests_total{kind=\"consumer\"} 0"});
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
  CheckHasAll(
      text,
      {"mesh_reconciler_drift_objects{kind=\"stream\",state=\"missing\"} 2",
       "mesh_reconciler_drift_objects{kind=\"consumer\",state=\"unexpected\"} 1",
       "mesh_reconciler_drift_objects{kind=\"users_file\",state=\"differs\"} 1",
       "mesh_reconciler_drift_objects{kind=\"consumer\",state=\"missing\"} 0",
       "mesh_reconciler_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"} 2",
       "mesh_reconciler_repairs_total{action=\"update\",kind=\"consumer\",result=\"failure\"} 1",
       "mesh_reconciler_repairs_total{action=\"create\",kind=\"consumer\",result=\"skipped\"} 1",
       // The write succeeded, the reload failed: counted apart.
       "mesh_reconciler_users_file_writes_total{result=\"success\"} 1",
       "mesh_reconciler_users_file_writes_total{result=\"failure\"} 0",
       "mesh_reconciler_users_file_reloads_total{result=\"success\"} 0",
       "mesh_reconciler_users_file_reloads_total{result=\"failure\"} 1",
       // A refused action makes the pass a failure: no success time.
       "mesh_reconciler_passes_total{result=\"failure\",trigger=\"advisory\"} 1",
       "mesh_reconciler_last_success_timestamp_seconds 0",
       "mesh_reconciler_pass_duration_seconds_count 1", "mesh_reconciler_records_valid 1"});
  // No per-object label: names of streams never appear.
  CHECK_FALSE(Has(text, "SEAT_"));
  CHECK_FALSE(Has(text, "users.conf"));

  PassReport converged;
  converged.trigger = Trigger::kPeriodic;
  converged.records_valid = true;
  converged.lane_open_failures = 3;  // reported by the pass after the apply that wanted them
  metrics.RecordPass(converged, 1700000100.25);
  const std::string after = metrics.Serialize();
  CheckHasAll(after, {"mesh_reconciler_drift_objects{kind=\"stream\",state=\"missing\"} 0",
                      "mesh_reconciler_bus_lane_open_failures_total 3",
                      "mesh_reconciler_passes_total{result=\"success\",trigger=\"periodic\"} 1",
                      "mesh_reconciler_last_success_timestamp_seconds 1700000100.25",
                      "mesh_reconciler_pass_duration_seconds_count 2"});
}

TEST_CASE("A failed write is a failed write, and the reload it skipped counts as nothing",
          "[metrics]") {
  Metrics metrics("test", "abc123");
  PassReport report;
  report.trigger = Trigger::kUsersFileChanged;
  report.outcomes = {OutcomeOf(ActionKind::kWriteUsersFile, Outcome::kFailed),
                     OutcomeOf(ActionKind::kReloadServer, Outcome::kSkipped)};
  metrics.RecordPass(report, 1);
  CheckHasAll(metrics.Serialize(),
              {"mesh_reconciler_users_file_writes_total{result=\"failure\"} 1",
               "mesh_reconciler_users_file_writes_total{result=\"success\"} 0",
               "mesh_reconciler_users_file_reloads_total{result=\"failure\"} 0",
               "mesh_reconciler_users_file_reloads_total{result=\"success\"} 0"});
}

TEST_CASE("A reload not signalled counts why: a stale or a foreign PID", "[metrics]") {
  Metrics metrics("test", "abc123");
  PassReport report;
  report.trigger = Trigger::kUsersFileChanged;
  ActionOutcome foreign = OutcomeOf(ActionKind::kReloadServer, Outcome::kFailed);
  foreign.signal_refusal = SignalRefusal::kForeign;
  report.outcomes = {OutcomeOf(ActionKind::kWriteUsersFile, Outcome::kDone), foreign};
  metrics.RecordPass(report, 1);
  ActionOutcome stale = OutcomeOf(ActionKind::kReloadServer, Outcome::kFailed);
  stale.signal_refusal = SignalRefusal::kStale;
  report.outcomes = {stale};
  metrics.RecordPass(report, 2);
  metrics.RecordPass(report, 3);
  CheckHasAll(metrics.Serialize(),
              {"mesh_reconciler_reload_signals_refused_total{reason=\"foreign\"} 1",
               "mesh_reconciler_reload_signals_refused_total{reason=\"stale\"} 2",
               "mesh_reconciler_users_file_reloads_total{result=\"failure\"} 3"});
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
  CheckHasAll(text, {"mesh_reconciler_drift_objects{kind=\"stream\",state=\"missing\"} 2",
                     "mesh_reconciler_passes_total{result=\"failure\",trigger=\"retry\"} 1"});
}

TEST_CASE("Gauges for the bus, the hold and the certificate", "[metrics]") {
  Metrics metrics("test", "abc123");
  metrics.SetBusConnected(true);
  metrics.SetHeld(true);
  CHECK(Has(metrics.Serialize(), "mesh_reconciler_bus_held 0"));  // no bus hold: 0 from start
  metrics.SetBusHeld(true);
  metrics.RecordException();
  metrics.SetCertificateExpiry(std::nullopt);
  CHECK_FALSE(Has(metrics.Serialize(), "mesh_reconciler_bus_certificate_expiry_timestamp_seconds"));
  metrics.SetCertificateExpiry(1893456000);
  const std::string text = metrics.Serialize();
  CheckHasAll(text, {"mesh_reconciler_bus_connected 1", "mesh_reconciler_held 1",
                     "mesh_reconciler_bus_held 1", "mesh_reconciler_exceptions_total 1",
                     "mesh_reconciler_bus_certificate_expiry_timestamp_seconds 1893456000"});
}

TEST_CASE("Contests are counted by kind, and the contested objects follow the passes that review",
          "[metrics]") {
  Metrics metrics("test", "abc123");
  PassReport pass;
  pass.records_valid = true;
  pass.contests.push_back(
      {ObjectKind::kStream, "EVENTS", {{"max_age", "7d", "1d"}}, 1, std::chrono::seconds(10)});
  pass.contested_objects = 1;
  metrics.RecordPass(pass, 1);
  std::string text = metrics.Serialize();
  CHECK(MetricValue(text, "mesh_reconciler_contests_total{kind=\"stream\"}") == 1);
  CHECK(MetricValue(text, "mesh_reconciler_contests_total{kind=\"consumer\"}") == 0);
  CHECK(MetricValue(text, "mesh_reconciler_contested_objects") == 1);
  // A pass that did not review (observing only) leaves the gauge as it was.
  PassReport held;
  held.records_valid = true;
  metrics.RecordPass(held, 2);
  CHECK(MetricValue(metrics.Serialize(), "mesh_reconciler_contested_objects") == 1);
  PassReport ended;
  ended.records_valid = true;
  ended.contested_objects = 0;
  metrics.RecordRepair(ended);
  text = metrics.Serialize();
  CHECK(MetricValue(text, "mesh_reconciler_contested_objects") == 0);
  CHECK(MetricValue(text, "mesh_reconciler_contests_total{kind=\"stream\"}") == 1);
}

TEST_CASE("Every name has the mesh_reconciler_ prefix", "[metrics]") {
  // The 0.1.0 names (deprecated until 0.2.0) are in kRenamedMetrics and only there.
  std::set<std::string> deprecated;
  for (const RenamedMetric& renamed : kRenamedMetrics) deprecated.emplace(renamed.deprecated);
  Metrics metrics("test", "abc123");
  metrics.RecordPass(BusyPass(), 1);  // a family without a series has no TYPE line
  metrics.SetCertificateExpiry(1893456000);
  std::istringstream lines(metrics.Serialize());
  size_t families = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    INFO(name);
    if (name.rfind("process_", 0) == 0 || deprecated.count(name) == 1) continue;
    CHECK(name.rfind("mesh_reconciler_", 0) == 0);
    ++families;
  }
  CHECK(families == 20);
}

TEST_CASE("Until 0.2.0 every 0.1.0 name exports exactly the samples of its new name", "[metrics]") {
  // The table as released: a dashboard or alert written against 0.1.0 reads these names.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"mesh_drift_objects", "mesh_reconciler_drift_objects"},
      {"mesh_reconcile_passes_total", "mesh_reconciler_passes_total"},
      {"mesh_reconcile_duration_seconds", "mesh_reconciler_pass_duration_seconds"},
      {"mesh_reconcile_last_success_timestamp_seconds",
       "mesh_reconciler_last_success_timestamp_seconds"},
      {"mesh_repairs_total", "mesh_reconciler_repairs_total"},
      {"mesh_bus_connected", "mesh_reconciler_bus_connected"},
      {"mesh_records_valid", "mesh_reconciler_records_valid"},
      {"mesh_users_file_writes_total", "mesh_reconciler_users_file_writes_total"},
      {"mesh_users_file_reloads_total", "mesh_reconciler_users_file_reloads_total"},
      {"mesh_reconcile_exceptions_total", "mesh_reconciler_exceptions_total"},
      {"mesh_bus_certificate_expiry_timestamp_seconds",
       "mesh_reconciler_bus_certificate_expiry_timestamp_seconds"},
      {"mesh_credentials_pending", "mesh_reconciler_credentials_pending"}};
  REQUIRE(kRenamedMetrics.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CHECK(kRenamedMetrics[i].deprecated == expected[i].first);
    CHECK(kRenamedMetrics[i].name == expected[i].second);
  }

  // Some of everything: passes of several results, repairs, users-file writes and reloads,
  // drift, an exception, the bus, the hold, the lease, the certificate and the hashing.
  Metrics metrics("test", "abc123", LeaseMode::kKv);
  metrics.RecordPass(BusyPass(), 1700000000.5);
  PassReport converged;
  converged.trigger = Trigger::kPeriodic;
  converged.records_valid = true;
  converged.duration_seconds = 3.5;
  metrics.RecordPass(converged, 1700000100.25);
  PassReport waiting;
  waiting.trigger = Trigger::kRetry;
  waiting.readiness = ServerReadiness::kNotReady;
  metrics.RecordPass(waiting, 1700000101);
  metrics.RecordException();
  metrics.SetBusConnected(true);
  metrics.SetHeld(true);
  metrics.SetLeaseHolder(true);
  metrics.SetCredentialsPending(3);
  metrics.SetCertificateExpiry(1893456000);
  const std::string text = metrics.Serialize();

  for (const auto& [old_name, new_name] : expected) {
    INFO(old_name << " -> " << new_name);
    const std::vector<std::string> current = SamplesOf(text, new_name);
    CHECK_FALSE(current.empty());
    CHECK(SamplesOf(text, old_name) == current);
    CHECK(CommentOf(text, "TYPE", old_name) == CommentOf(text, "TYPE", new_name));
    const std::optional<std::string> help = CommentOf(text, "HELP", old_name);
    REQUIRE(help);
    CHECK(help->rfind("Deprecated: renamed to " + new_name + "; removed in 0.2.0.", 0) == 0);
    const std::optional<std::string> new_help = CommentOf(text, "HELP", new_name);
    REQUIRE(new_help);
    CHECK(new_help->find("Deprecated") == std::string::npos);
  }
  // The activity shows under both names, not only zeros.
  CheckHasAll(
      text,
      {"mesh_reconciler_passes_total{result=\"waiting\",trigger=\"retry\"} 1",
       "mesh_reconcile_passes_total{result=\"waiting\",trigger=\"retry\"} 1",
       "mesh_reconciler_pass_duration_seconds_count 3", "mesh_reconcile_duration_seconds_count 3",
       "mesh_reconcile_duration_seconds_bucket{le=\"5\"} 3",
       "mesh_reconcile_duration_seconds_bucket{le=\"2.5\"} 2",
       "mesh_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"} 2",
       "mesh_reconcile_last_success_timestamp_seconds 1700000100.25",
       "mesh_reconcile_exceptions_total 1", "mesh_bus_connected 1", "mesh_credentials_pending 3",
       "mesh_bus_certificate_expiry_timestamp_seconds 1893456000"});
  // The names that did not change are exported once.
  for (const char* kept :
       {"mesh_reconciler_held", "mesh_reconciler_build_info", "mesh_reconciler_lease_holder"}) {
    INFO(kept);
    CHECK(SamplesOf(text, kept).size() == 1);
  }
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
