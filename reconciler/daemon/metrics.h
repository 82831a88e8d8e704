// The daemon's Prometheus metrics: one prometheus-cpp core registry, served as text by GET
// /metrics. No per-object labels: every label takes a value from a small fixed set (trigger,
// result, ObjectKind, DriftState, the verb of an ActionKind), so cardinality stays bounded.
// Every name has the application's prefix, mesh_reconciler_ (README.md, "Metric names").
//
//   mesh_reconciler_drift_objects{kind,state}        gauge: drift remaining after the last pass
//                                                    that could observe (all 15 series, 0 if none)
//   mesh_reconciler_passes_total{trigger,result}     counter; result success|failure|waiting
//   mesh_reconciler_pass_duration_seconds            histogram of pass durations
//   mesh_reconciler_last_success_timestamp_seconds   gauge: end of the last successful pass; 0
//                                                    until a pass succeeds
//   mesh_reconciler_repairs_total{kind,action,result}  counter; result success|failure|skipped
//   mesh_reconciler_bus_connected                    gauge 0/1
//   mesh_reconciler_records_valid                    gauge 0/1 (0 until a pass has read them)
//   mesh_reconciler_users_file_writes_total{result}  counter; result success|failure
//   mesh_reconciler_users_file_reloads_total{result} counter; result success|failure (a reload
//                                                    skipped after a failed write is not counted)
//   mesh_reconciler_held                             gauge 0/1: passes observe only, by any hold
//   mesh_reconciler_bus_held                         gauge 0/1: the hold for the whole bus (its
//                                                    record in the lease's bucket) is in force, as
//                                                    this instance last read it
//   mesh_reconciler_build_info{version,commit}       gauge, always 1
//   mesh_reconciler_exceptions_total                 counter: passes and lease rounds that threw
//                                                    (a bug)
//   mesh_reconciler_bus_certificate_expiry_timestamp_seconds
//                                                    gauge; absent until the expiry is known
//   mesh_reconciler_lease_holder                     gauge 0/1: 1 without a lease; with one, 0
//                                                    until a round acquires it
//   mesh_reconciler_credentials_pending              gauge: plain passwords still being hashed
//   mesh_reconciler_bus_lane_open_failures_total     counter: further connections a large apply
//                                                    wanted (observers::Spread::kLanes) that could
//                                                    not be opened; it used those open instead
//   mesh_reconciler_reload_signals_refused_total{reason}
//                                                    counter; reason stale|foreign: reloads not
//                                                    signalled because the pid file's PID was not
//                                                    a running nats-server (apply.h, SignalReload)
//   mesh_reconciler_contests_total{kind}             counter: objects found changed back by
//                                                    another writer after our update (kind
//                                                    stream|consumer; reconciler/plan/contest.h)
//   mesh_reconciler_contested_objects                gauge: objects in a contest (their updates
//                                                    backed off) after the last pass
//   process_*                                        the standard process metrics
//                                                    (reconciler/daemon/process_metrics.h), read at
//                                                    scrape
//
// Until 0.2.0 each metric renamed from 0.1.0 (kRenamedMetrics) is exported under its old name
// too: the same type, labels and samples (every change goes to both, inside this class), and
// HELP "Deprecated: renamed to <new>; removed in 0.2.0. ...". A scrape that runs while a change
// is being made may see it in one of the two only; the next scrape sees it in both.
//
// A pass succeeds when its status is ok and no action failed (see PassSucceeded).
//
// Thread-safety: every method may be called from any thread (prometheus-cpp's registry,
// families and metrics are internally synchronised; the optional certificate gauges are guarded).
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "model/enum_names.h"
#include "model/thread_safety.h"
#include "reconciler/daemon/backoff.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/pass/report.h"

namespace mesh::reconciler {

// A metric renamed to the mesh_reconciler_ prefix: `deprecated` is its 0.1.0 name, exported
// beside `name` with the same labels and samples until 0.2.0 removes it.
struct RenamedMetric {
  std::string_view deprecated;
  std::string_view name;
};
// Every renamed metric, {old, new}, one a line (tests/scripts/lib.sh reads this table to refuse
// the old names in the dashboard and the alert rules). mesh_reconciler_held,
// mesh_reconciler_build_info and mesh_reconciler_lease_holder kept their names.
inline constexpr std::array<RenamedMetric, 12> kRenamedMetrics = {{
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
    {"mesh_credentials_pending", "mesh_reconciler_credentials_pending"},
}};

class Metrics {
 public:
  // `commit` is the source revision the binary was built from ("unknown" outside git). With a
  // lease, mesh_reconciler_lease_holder starts at 0: a starting instance acts on nothing until a
  // round acquires the lease (1 from the start would count every starting pod as a holder).
  Metrics(const std::string& version, const std::string& commit, LeaseMode lease = LeaseMode::kOff);
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // A finished pass: counters, duration, drift (only when the pass could observe: status ok),
  // repairs and users-file reloads from its outcomes, records validity, last success time.
  // `now_unix_seconds` is the wall clock at the end of the pass (the caller reads the clock).
  void RecordPass(const PassReport& report, double now_unix_seconds);
  // A kRepair pass (the named streams alone, between full passes): counted in passes_total
  // (trigger "repair") and its actions in the repair counters; the drift gauges, the last
  // success time and the duration histogram follow the full passes only.
  void RecordRepair(const PassReport& report);
  // A pass that threw: counted apart (and as a failed pass by RecordPass).
  void RecordException();
  void SetBusConnected(bool connected);
  void SetHeld(bool held);
  void SetBusHeld(bool held);
  // mesh_reconciler_lease_holder between passes (a lease round or release changed it).
  void SetLeaseHolder(bool may_act);
  // Plain passwords the background hashing has still to do (any thread).
  void SetCredentialsPending(int64_t pending);
  // nullopt keeps the gauge absent (the expiry is not known).
  void SetCertificateExpiry(std::optional<int64_t> unix_seconds);

  // The Prometheus text exposition format (version 0.0.4) of everything above.
  std::string Serialize() const;

  static constexpr size_t kDriftStates = 5;  // DriftState::kMissing .. kUnrecoverable

 private:
  void RecordOutcomes(const PassReport& report);  // the repair, attempt and lane counters
  // One metric under its name and under its deprecated name (kRenamedMetrics): every change goes
  // to both, so that the two export the same samples.
  template <typename M>
  struct Twin {
    M* current = nullptr;
    M* deprecated = nullptr;
    void Set(double value) const {
      current->Set(value);
      deprecated->Set(value);
    }
    void Increment() const {
      current->Increment();
      deprecated->Increment();
    }
    void Observe(double value) const {
      current->Observe(value);
      deprecated->Observe(value);
    }
  };
  // The two families of a renamed metric; Add adds (or finds) the same labels in both.
  template <typename M>
  struct TwinFamily {
    prometheus::Family<M>* current = nullptr;
    prometheus::Family<M>* deprecated = nullptr;
    template <typename... Args>
    Twin<M> Add(const prometheus::Labels& labels, const Args&... args) const {
      return {&current->Add(labels, args...), &deprecated->Add(labels, args...)};
    }
  };

  // Registers `name` and its deprecated name (kRenamedMetrics, which must list it).
  template <typename M>
  static TwinFamily<M> RegisterRenamed(prometheus::Registry& registry, std::string_view name,
                                       const std::string& help);

  std::shared_ptr<prometheus::Registry> registry_;
  TwinFamily<prometheus::Gauge> drift_;
  TwinFamily<prometheus::Counter> passes_;
  Twin<prometheus::Histogram> duration_;
  Twin<prometheus::Gauge> last_success_;
  TwinFamily<prometheus::Counter> repairs_;
  Twin<prometheus::Gauge> bus_connected_;
  Twin<prometheus::Gauge> records_valid_;
  TwinFamily<prometheus::Counter> writes_;
  TwinFamily<prometheus::Counter> reloads_;
  prometheus::Gauge& held_;
  prometheus::Gauge& bus_held_;
  Twin<prometheus::Counter> exceptions_;
  prometheus::Gauge& lease_holder_;
  Twin<prometheus::Gauge> credentials_pending_;
  prometheus::Counter& lane_open_failures_;
  prometheus::Family<prometheus::Counter>& reload_refusals_;
  prometheus::Family<prometheus::Counter>& contests_;
  prometheus::Gauge& contested_objects_;
  // [ObjectKind][DriftState], created at construction so all 15 series are always present.
  std::array<std::array<Twin<prometheus::Gauge>, kDriftStates>, 3> drift_cells_{};
  Mutex certificate_mutex_;
  // Guarded; both created on the first known value.
  std::optional<Twin<prometheus::Gauge>> certificate_expiry_ GUARDED_BY(certificate_mutex_);
};

}  // namespace mesh::reconciler
