#include "reconciler/daemon/metrics.h"

#include <prometheus/text_serializer.h>

#include <stdexcept>
#include <type_traits>

#include "model/thread_safety.h"
#include "reconciler/daemon/process_metrics.h"

namespace mesh::reconciler {
namespace {

constexpr std::array kKinds = {ObjectKind::kUsersFile, ObjectKind::kStream, ObjectKind::kConsumer};
constexpr std::array kStates = {DriftState::kMissing, DriftState::kDiffers, DriftState::kUnexpected,
                                DriftState::kUnhealthy, DriftState::kUnrecoverable};
static_assert(kStates.size() == Metrics::kDriftStates, "one drift cell per state");
// The triggers of a daemon's passes (kOnce is the CLI's, never a daemon's), and every action a
// repair can take: the label values of mesh_reconciler_passes_total and
// mesh_reconciler_repairs_total, whose series are created at 0 at start so that rate() and the
// dashboard's panels read 0, not "no data", until the first pass or repair. The asserts catch an
// enumerator appended to either enum and not listed here.
constexpr std::array kDaemonTriggers = {Trigger::kStart,          Trigger::kPeriodic,
                                        Trigger::kAdvisory,       Trigger::kReconnect,
                                        Trigger::kRecordsChanged, Trigger::kUsersFileChanged,
                                        Trigger::kForced,         Trigger::kRetry,
                                        Trigger::kLeaseAcquired,  Trigger::kRepair};
static_assert(static_cast<size_t>(Trigger::kRepair) + 1 == kDaemonTriggers.size() + 1,
              "every trigger but kOnce");
constexpr std::array kPassResults = {PassResult::kSuccess, PassResult::kFailure,
                                     PassResult::kWaiting};
constexpr std::array kActionKinds = {ActionKind::kWriteUsersFile, ActionKind::kReloadServer,
                                     ActionKind::kCreateStream,   ActionKind::kUpdateStream,
                                     ActionKind::kDeleteStream,   ActionKind::kCreateConsumer,
                                     ActionKind::kUpdateConsumer, ActionKind::kDeleteConsumer};
static_assert(static_cast<size_t>(ActionKind::kDeleteConsumer) + 1 == kActionKinds.size(),
              "every action kind");
constexpr std::array kRepairResults = {Outcome::kDone, Outcome::kSkipped, Outcome::kFailed};

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

// The builder of a family of M (prometheus::BuildGauge and the like).
template <typename M>
prometheus::detail::Builder<M> Build() {
  if constexpr (std::is_same_v<M, prometheus::Gauge>) {
    return prometheus::BuildGauge();
  } else if constexpr (std::is_same_v<M, prometheus::Counter>) {
    return prometheus::BuildCounter();
  } else {
    static_assert(std::is_same_v<M, prometheus::Histogram>);
    return prometheus::BuildHistogram();
  }
}

// The 0.1.0 name of the metric now called `name`.
std::string_view DeprecatedName(std::string_view name) {
  for (const RenamedMetric& renamed : kRenamedMetrics) {
    if (renamed.name == name) return renamed.deprecated;
  }
  throw std::logic_error("metric " + std::string(name) + " is not in kRenamedMetrics");
}

}  // namespace

template <typename M>
Metrics::TwinFamily<M> Metrics::RegisterRenamed(prometheus::Registry& registry,
                                                std::string_view name, const std::string& help) {
  const std::string current(name);
  return {&Build<M>().Name(current).Help(help).Register(registry),
          &Build<M>()
               .Name(std::string(DeprecatedName(name)))
               .Help("Deprecated: renamed to " + current + "; removed in 0.2.0. " + help)
               .Register(registry)};
}

Metrics::Metrics(const std::string& version, const std::string& commit, LeaseMode lease)
    : registry_(std::make_shared<prometheus::Registry>()),
      drift_(RegisterRenamed<prometheus::Gauge>(
          *registry_, "mesh_reconciler_drift_objects",
          "Objects drifting from the records after the last pass, by kind and state")),
      passes_(RegisterRenamed<prometheus::Counter>(
          *registry_, "mesh_reconciler_passes_total",
          "Reconcile passes, by what triggered them and their result")),
      duration_(RegisterRenamed<prometheus::Histogram>(*registry_,
                                                       "mesh_reconciler_pass_duration_seconds",
                                                       "Duration of reconcile passes")
                    .Add({}, DurationBuckets())),
      last_success_(RegisterRenamed<prometheus::Gauge>(
                        *registry_, "mesh_reconciler_last_success_timestamp_seconds",
                        "Unix time at which the last successful pass ended; 0 if none")
                        .Add({})),
      repairs_(RegisterRenamed<prometheus::Counter>(
          *registry_, "mesh_reconciler_repairs_total",
          "Repair actions attempted, by object kind, action and result")),
      bus_connected_(
          RegisterRenamed<prometheus::Gauge>(*registry_, "mesh_reconciler_bus_connected",
                                             "1 while the reconciler is connected to the bus")
              .Add({})),
      records_valid_(
          RegisterRenamed<prometheus::Gauge>(*registry_, "mesh_reconciler_records_valid",
                                             "1 when the records file last read was valid")
              .Add({})),
      writes_(RegisterRenamed<prometheus::Counter>(
          *registry_, "mesh_reconciler_users_file_writes_total",
          "Users file writes (temporary file, fsync, rename), by result")),
      reloads_(RegisterRenamed<prometheus::Counter>(
          *registry_, "mesh_reconciler_users_file_reloads_total",
          "Server reloads of the users file (SIGHUP, confirmed), by result")),
      held_(prometheus::BuildGauge()
                .Name("mesh_reconciler_held")
                .Help("1 while on-call holds the reconciler (passes observe only)")
                .Register(*registry_)
                .Add({})),
      bus_held_(prometheus::BuildGauge()
                    .Name("mesh_reconciler_bus_held")
                    .Help("1 while the hold for the whole bus is in force, as this instance "
                          "last read it (then mesh_reconciler_held is 1 too)")
                    .Register(*registry_)
                    .Add({})),
      exceptions_(RegisterRenamed<prometheus::Counter>(
                      *registry_, "mesh_reconciler_exceptions_total",
                      "Passes and lease rounds that ended in an exception (a bug); the loop "
                      "carried on")
                      .Add({})),
      lease_holder_(prometheus::BuildGauge()
                        .Name("mesh_reconciler_lease_holder")
                        .Help("1 when this instance may apply repairs (always 1 standalone)")
                        .Register(*registry_)
                        .Add({})),
      credentials_pending_(RegisterRenamed<prometheus::Gauge>(
                               *registry_, "mesh_reconciler_credentials_pending",
                               "Plain passwords still being hashed; the users file waits for them")
                               .Add({})),
      lane_open_failures_(prometheus::BuildCounter()
                              .Name("mesh_reconciler_bus_lane_open_failures_total")
                              .Help("Further connections a large apply wanted that could not be "
                                    "opened; it went on the connections open")
                              .Register(*registry_)
                              .Add({})),
      reload_refusals_(prometheus::BuildCounter()
                           .Name("mesh_reconciler_reload_signals_refused_total")
                           .Help("Users-file reloads not signalled: the pid file named no running "
                                 "nats-server (stale) or another program (foreign)")
                           .Register(*registry_)),
      contests_(prometheus::BuildCounter()
                    .Name("mesh_reconciler_contests_total")
                    .Help("Objects found changed back by another writer after this reconciler "
                          "updated them; each backs the object's updates off")
                    .Register(*registry_)),
      contested_objects_(prometheus::BuildGauge()
                             .Name("mesh_reconciler_contested_objects")
                             .Help("Objects in a contest with another writer after the last pass "
                                   "(their updates backed off)")
                             .Register(*registry_)
                             .Add({})) {
  contests_.Add({{"kind", ToString(ObjectKind::kStream)}});
  contests_.Add({{"kind", ToString(ObjectKind::kConsumer)}});
  for (size_t k = 0; k < kKinds.size(); ++k) {
    for (size_t s = 0; s < kStates.size(); ++s) {
      drift_cells_[k][s] =
          drift_.Add({{"kind", ToString(kKinds[k])}, {"state", ToString(kStates[s])}});
    }
  }
  for (const Trigger trigger : kDaemonTriggers) {
    for (const PassResult result : kPassResults) {
      passes_.Add({{"trigger", ToString(trigger)}, {"result", ToString(result)}});
    }
  }
  for (const ActionKind kind : kActionKinds) {
    for (const Outcome outcome : kRepairResults) {
      repairs_.Add({{"kind", ToString(KindOf(kind))},
                    {"action", VerbOf(kind)},
                    {"result", RepairResult(outcome)}});
    }
  }
  for (const auto* family : {&writes_, &reloads_}) {
    family->Add({{"result", "success"}});
    family->Add({{"result", "failure"}});
  }
  for (const SignalRefusal reason : {SignalRefusal::kStale, SignalRefusal::kForeign}) {
    reload_refusals_.Add({{"reason", ToString(reason)}});
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
      for (size_t s = 0; s < kStates.size(); ++s) drift_cells_[k][s].Set(counts[k][s]);
    }
  }
  RecordOutcomes(report);
}

void Metrics::RecordRepair(const PassReport& report) {
  passes_.Add({{"trigger", ToString(report.trigger)}, {"result", ToString(PassSucceeded(report))}})
      .Increment();
  RecordOutcomes(report);
}

void Metrics::RecordOutcomes(const PassReport& report) {
  lane_open_failures_.Increment(static_cast<double>(report.lane_open_failures));
  for (const ContestFound& contest : report.contests) {
    contests_.Add({{"kind", ToString(contest.kind)}}).Increment();
  }
  if (report.contested_objects) {
    contested_objects_.Set(static_cast<double>(*report.contested_objects));
  }
  for (const ActionOutcome& outcome : report.outcomes) {
    const ActionKind kind = outcome.action.kind;
    repairs_
        .Add({{"kind", ToString(KindOf(kind))},
              {"action", VerbOf(kind)},
              {"result", RepairResult(outcome.outcome)}})
        .Increment();
    if (outcome.signal_refusal != SignalRefusal::kNone) {
      reload_refusals_.Add({{"reason", ToString(outcome.signal_refusal)}}).Increment();
    }
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

void Metrics::SetBusHeld(bool held) {
  bus_held_.Set(held ? 1 : 0);
}

void Metrics::SetCertificateExpiry(std::optional<int64_t> unix_seconds) {
  if (!unix_seconds) return;
  MutexLock lock(certificate_mutex_);
  if (!certificate_expiry_) {
    certificate_expiry_ =
        RegisterRenamed<prometheus::Gauge>(
            *registry_, "mesh_reconciler_bus_certificate_expiry_timestamp_seconds",
            "Unix time at which the bus's TLS certificate expires")
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
