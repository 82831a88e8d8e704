#include "reconciler/metrics.h"

#include <prometheus/text_serializer.h>

#include "reconciler/process_metrics.h"

namespace mesh::reconciler {
namespace {

constexpr std::array kKinds = {ObjectKind::kUsersFile, ObjectKind::kStream, ObjectKind::kConsumer};
constexpr std::array kStates = {DriftState::kMissing, DriftState::kDiffers, DriftState::kUnexpected,
                                DriftState::kUnhealthy, DriftState::kUnrecoverable};
static_assert(kStates.size() == Metrics::kDriftStates, "one drift cell per state");

const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const prometheus::Histogram::BucketBoundaries buckets = {
      0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
  return buckets;
}

const char* RepairResult(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDone:
      return "success";
    case Outcome::kSkipped:
      return "skipped";
    case Outcome::kRefused:
    case Outcome::kFailed:
      return "failure";
  }
  return "failure";
}

// The result label of a users-file write or reload; nothing for a step that was not attempted
// (a reload skipped because its write failed is not a failed reload).
std::optional<const char*> AttemptResult(Outcome outcome) {
  switch (outcome) {
    case Outcome::kDone:
      return "success";
    case Outcome::kRefused:
    case Outcome::kFailed:
      return "failure";
    case Outcome::kSkipped:
      return std::nullopt;
  }
  return "failure";
}

}  // namespace

const char* ToString(PassResult v) {
  switch (v) {
    case PassResult::kSuccess:
      return "success";
    case PassResult::kFailure:
      return "failure";
    case PassResult::kWaiting:
      return "waiting";
  }
  return "failure";
}

PassResult PassSucceeded(const PassReport& report) {
  if (report.readiness == ServerReadiness::kNotReady) return PassResult::kWaiting;
  return report.status.ok() && !report.any_action_failed() ? PassResult::kSuccess
                                                           : PassResult::kFailure;
}

Metrics::Metrics(const std::string& version, const std::string& commit, LeaseMode lease)
    : registry_(std::make_shared<prometheus::Registry>()),
      drift_(prometheus::BuildGauge()
                 .Name("mesh_drift_objects")
                 .Help("Objects drifting from the records after the last pass, by kind and state")
                 .Register(*registry_)),
      passes_(prometheus::BuildCounter()
                  .Name("mesh_reconcile_passes_total")
                  .Help("Reconcile passes, by what triggered them and their result")
                  .Register(*registry_)),
      duration_family_(prometheus::BuildHistogram()
                           .Name("mesh_reconcile_duration_seconds")
                           .Help("Duration of reconcile passes")
                           .Register(*registry_)),
      duration_(duration_family_.Add({}, DurationBuckets())),
      last_success_(prometheus::BuildGauge()
                        .Name("mesh_reconcile_last_success_timestamp_seconds")
                        .Help("Unix time at which the last successful pass ended; 0 if none")
                        .Register(*registry_)
                        .Add({})),
      repairs_(prometheus::BuildCounter()
                   .Name("mesh_repairs_total")
                   .Help("Repair actions attempted, by object kind, action and result")
                   .Register(*registry_)),
      bus_connected_(prometheus::BuildGauge()
                         .Name("mesh_bus_connected")
                         .Help("1 while the reconciler is connected to the bus")
                         .Register(*registry_)
                         .Add({})),
      records_valid_(prometheus::BuildGauge()
                         .Name("mesh_records_valid")
                         .Help("1 when the records file last read was valid")
                         .Register(*registry_)
                         .Add({})),
      writes_(prometheus::BuildCounter()
                  .Name("mesh_users_file_writes_total")
                  .Help("Users file writes (temporary file, fsync, rename), by result")
                  .Register(*registry_)),
      reloads_(prometheus::BuildCounter()
                   .Name("mesh_users_file_reloads_total")
                   .Help("Server reloads of the users file (SIGHUP, confirmed), by result")
                   .Register(*registry_)),
      held_(prometheus::BuildGauge()
                .Name("mesh_reconciler_held")
                .Help("1 while on-call holds the reconciler (passes observe only)")
                .Register(*registry_)
                .Add({})),
      exceptions_(
          prometheus::BuildCounter()
              .Name("mesh_reconcile_exceptions_total")
              .Help(
                  "Passes and lease rounds that ended in an exception (a bug); the loop carried on")
              .Register(*registry_)
              .Add({})),
      lease_holder_(prometheus::BuildGauge()
                        .Name("mesh_reconciler_lease_holder")
                        .Help("1 when this instance may apply repairs (always 1 standalone)")
                        .Register(*registry_)
                        .Add({})),
      credentials_pending_(
          prometheus::BuildGauge()
              .Name("mesh_credentials_pending")
              .Help("Plain passwords still being hashed; the users file waits for them")
              .Register(*registry_)
              .Add({})) {
  for (size_t k = 0; k < kKinds.size(); ++k) {
    for (size_t s = 0; s < kStates.size(); ++s) {
      drift_cells_[k][s] =
          &drift_.Add({{"kind", ToString(kKinds[k])}, {"state", ToString(kStates[s])}});
    }
  }
  for (auto* family : {&writes_, &reloads_}) {
    family->Add({{"result", "success"}});
    family->Add({{"result", "failure"}});
  }
  prometheus::BuildGauge()
      .Name("mesh_reconciler_build_info")
      .Help("Build information; the value is always 1")
      .Register(*registry_)
      .Add({{"version", version}, {"commit", commit}})
      .Set(1);
  lease_holder_.Set(lease == LeaseMode::kOff ? 1 : 0);
}

void Metrics::RecordPass(const PassReport& report, double now_unix_seconds) {
  const PassResult result = PassSucceeded(report);
  passes_.Add({{"trigger", ToString(report.trigger)}, {"result", ToString(result)}}).Increment();
  duration_.Observe(report.duration_seconds);
  if (result == PassResult::kSuccess) last_success_.Set(now_unix_seconds);
  records_valid_.Set(report.records_valid ? 1 : 0);
  lease_holder_.Set(
      report.lease.role == LeaseRole::kOff || report.lease.role == LeaseRole::kHolder ? 1 : 0);
  if (report.status.ok()) {
    std::array<std::array<int, Metrics::kDriftStates>, 3> counts{};
    for (const DriftEntry& entry : report.remaining) {
      ++counts[static_cast<size_t>(entry.kind)][static_cast<size_t>(entry.state)];
    }
    for (size_t k = 0; k < kKinds.size(); ++k) {
      for (size_t s = 0; s < kStates.size(); ++s) drift_cells_[k][s]->Set(counts[k][s]);
    }
  }
  for (const ActionOutcome& outcome : report.outcomes) {
    const ActionKind kind = outcome.action.kind;
    repairs_
        .Add({{"kind", ToString(KindOf(kind))},
              {"action", VerbOf(kind)},
              {"result", RepairResult(outcome.outcome)}})
        .Increment();
    if (kind == ActionKind::kWriteUsersFile || kind == ActionKind::kReloadServer) {
      if (const auto result = AttemptResult(outcome.outcome)) {
        (kind == ActionKind::kWriteUsersFile ? writes_ : reloads_)
            .Add({{"result", *result}})
            .Increment();
      }
    }
  }
}

void Metrics::RecordException() {
  exceptions_.Increment();
}

void Metrics::SetBusConnected(bool connected) {
  bus_connected_.Set(connected ? 1 : 0);
}

void Metrics::SetLeaseHolder(bool may_act) {
  lease_holder_.Set(may_act ? 1 : 0);
}

void Metrics::SetCredentialsPending(int64_t pending) {
  credentials_pending_.Set(static_cast<double>(pending));
}

void Metrics::SetHeld(bool held) {
  held_.Set(held ? 1 : 0);
}

void Metrics::SetCertificateExpiry(std::optional<int64_t> unix_seconds) {
  if (!unix_seconds) return;
  std::lock_guard<std::mutex> lock(certificate_mutex_);
  if (certificate_expiry_ == nullptr) {
    certificate_expiry_ = &prometheus::BuildGauge()
                               .Name("mesh_bus_certificate_expiry_timestamp_seconds")
                               .Help("Unix time at which the bus's TLS certificate expires")
                               .Register(*registry_)
                               .Add({});
  }
  certificate_expiry_->Set(static_cast<double>(*unix_seconds));
}

std::string Metrics::Serialize() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& family : CollectProcessMetrics()) {
    families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace mesh::reconciler
