// With --lease: this instance's part in the lease and in the bus hold, on the pass's
// connection. The keeper (lease_store.h) is made at the first pass; a round logs a change of
// role, a bucket's raised replicas or max age, and a bus hold that appeared, ended or became
// unreadable; the fence lets an apply chunk go only while it would end under the lease.
//
// Thread-safety: the reconcile thread only, like the pass (Reconciler's RunPass, RunLeaseRound,
// ReleaseLease, WriteBusHold, DeleteBusHold).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "model/result.h"
#include "observers/bus.h"
#include "reconciler/apply/apply.h"
#include "reconciler/pass/lease_store.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/pass/report.h"
#include "reconciler/plan/bus_hold.h"
#include "reconciler/plan/lease.h"

namespace mesh::reconciler {

class LeaseRounds {
 public:
  using Clock = std::chrono::steady_clock;
  // `settings` (--lease, the interval, the request timeout) must outlive this object.
  explicit LeaseRounds(const PassSettings& settings) : settings_(settings) {}

  // With --lease: makes the keeper, once, with an identity of its own.
  void Start();
  bool active() const { return keeper_ != nullptr; }
  const LeaseKeeper& keeper() const { return *keeper_; }  // active() only
  // The JetStream cluster's size as the last pass observed it (the bucket's replicas).
  void set_cluster_size(int servers) { cluster_size_ = servers; }

  // One round at now, on `connection`; logs a change of role. The new state.
  LeaseState Round(uint64_t pass_id, natsConnection* connection);
  // Before a pass acts: the bus hold read again, so that one written since the round stops the
  // pass (kHeld: `report.bus_hold` says which). Logs a hold that appeared or ended.
  enum class HoldVerdict { kAct, kHeld, kUnknown };
  HoldVerdict CheckBusHold(uint64_t pass_id, natsConnection* connection, PassReport& report);
  // Apply's hook before each chunk of JetStream actions: renews the lease when a round is due
  // (a long pass must not outlive its lease) or too little of it is left for the chunk, then
  // lets the chunk go only while it would end under the lease.
  ChunkDecision Fence(uint64_t pass_id, observers::BusConnection* bus);
  // A round between passes, on a connected `bus`: what it changed (kNone without a keeper).
  LeaseChange RoundBetweenPasses(observers::BusConnection* bus);
  Status WriteBusHold(natsConnection* connection, BusHold hold);
  Status DeleteBusHold(natsConnection* connection);
  // Gives the lease up when held (a connected `bus`; otherwise it ages out on its own).
  void Release(observers::BusConnection* bus);

 private:
  void NoteBusHold(uint64_t pass_id, const BusHoldView& before);

  const PassSettings& settings_;
  std::unique_ptr<LeaseKeeper> keeper_;  // with --lease, from the first pass
  Clock::time_point last_round_{};       // when Round last ran
  int cluster_size_ = 1;
};

}  // namespace mesh::reconciler
