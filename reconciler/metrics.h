// The daemon's Prometheus metrics: one prometheus-cpp core registry, served as text by GET
// /metrics. No per-object labels: every label takes a value from a small fixed set (trigger,
// result, ObjectKind, DriftState, the verb of an ActionKind), so cardinality stays bounded.
//
//   mesh_drift_objects{kind,state}                  gauge: drift remaining after the last pass
//                                                   that could observe (all 9 series, 0 if none)
//   mesh_reconcile_passes_total{trigger,result}     counter; result success|failure
//   mesh_reconcile_duration_seconds                 histogram of pass durations
//   mesh_reconcile_last_success_timestamp_seconds   gauge; 0 until a pass succeeds
//   mesh_repairs_total{kind,action,result}          counter; result success|failure|skipped
//   mesh_bus_connected                              gauge 0/1
//   mesh_records_valid                              gauge 0/1 (0 until a pass has read them)
//   mesh_users_file_writes_total{result}            counter; result success|failure
//   mesh_users_file_reloads_total{result}           counter; result success|failure (a reload
//                                                   skipped after a failed write is not counted)
//   mesh_reconciler_held                            gauge 0/1
//   mesh_reconciler_build_info{version,commit}      gauge, always 1
//   mesh_reconcile_exceptions_total                 counter: passes and lease rounds that threw (a
//                                                   bug)
//   mesh_bus_certificate_expiry_timestamp_seconds   gauge; absent until the expiry is known
//   mesh_reconciler_lease_holder                    gauge 0/1: 1 without a lease; with one, 0
//                                                   until a round acquires it
//   process_*                                       the standard process metrics
//                                                   (reconciler/process_metrics.h), read at scrape
//
// A pass succeeds when its status is ok and no action failed (see PassSucceeded).
//
// Thread-safety: every method may be called from any thread (prometheus-cpp's registry,
// families and metrics are internally synchronised; the optional certificate gauge is guarded).
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

#include "reconciler/pass.h"
#include "reconciler/settings.h"

namespace mesh::reconciler {

// kWaiting: the server was not ready (PassReport::readiness), a wait rather than a failure.
enum class PassResult { kSuccess, kFailure, kWaiting };
const char* ToString(PassResult v);  // "success", "failure", "waiting"

// Ok status and no failed action. Remaining drift that cannot be repaired is not a failure.
PassResult PassSucceeded(const PassReport& report);

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
  // A pass that threw: counted apart (and as a failed pass by RecordPass).
  void RecordException();
  void SetBusConnected(bool connected);
  void SetHeld(bool held);
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
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& drift_;
  prometheus::Family<prometheus::Counter>& passes_;
  prometheus::Family<prometheus::Histogram>& duration_family_;
  prometheus::Histogram& duration_;
  prometheus::Gauge& last_success_;
  prometheus::Family<prometheus::Counter>& repairs_;
  prometheus::Gauge& bus_connected_;
  prometheus::Gauge& records_valid_;
  prometheus::Family<prometheus::Counter>& writes_;
  prometheus::Family<prometheus::Counter>& reloads_;
  prometheus::Gauge& held_;
  prometheus::Counter& exceptions_;
  prometheus::Gauge& lease_holder_;
  prometheus::Gauge& credentials_pending_;
  // [ObjectKind][DriftState], created at construction so all 15 series are always present.
  std::array<std::array<prometheus::Gauge*, kDriftStates>, 3> drift_cells_{};
  std::mutex certificate_mutex_;
  prometheus::Gauge* certificate_expiry_ = nullptr;  // guarded; created on first known value
};

}  // namespace mesh::reconciler
