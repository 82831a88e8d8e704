// The effectful shell of the lease (reconciler/plan/lease.h): the LeaseKeeper that runs one
// lease round per pass on the store over JetStream KV (reconciler/apply/kv_lease_store.h).
//
// Thread-safety: use from the thread that owns the connection (the reconcile thread).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <string>

#include "model/result.h"
#include "reconciler/apply/kv_lease_store.h"
#include "reconciler/plan/bus_hold.h"
#include "reconciler/plan/lease.h"

namespace mesh::reconciler {

// A note for the log, said once per change: Offer keeps a text that differs from the last one
// offered (empty: nothing to say), Take hands it over once.
class OnceNote {
 public:
  void Offer(const std::string& text);
  std::string Take();

 private:
  std::string last_;
  std::string pending_;
};

struct LeaseSettings {
  std::string identity;                  // unique per instance: NewLeaseIdentity()
  std::chrono::milliseconds ttl{60000};  // the bucket's max age when this instance creates it
  std::chrono::milliseconds request_timeout{5000};
};

// One per reconciler. Not thread-safe: the reconcile thread only.
class LeaseKeeper {
 public:
  explicit LeaseKeeper(LeaseSettings settings);

  // One round at the start of a pass, at `now`, on the pass's connection (not owned; may be a
  // different one from pass to pass): opens the bucket (creating it when absent, e.g. after the
  // cluster's storage was wiped, with min(3, cluster_size) replicas), then acquires or renews.
  // Then reads the bus hold (ReadBusHold) from the same bucket; `now_unix_ms` is the wall
  // clock's now, for the hold's `until`.
  LeaseState Round(natsConnection* connection, int cluster_size, LeaseClock::time_point now,
                   int64_t now_unix_ms);

  // Releases the lease when this instance holds it (Lease::Release), on `connection`.
  Status Release(natsConnection* connection, int cluster_size);

  // Reads the bus hold again (before a pass acts: a hold written since the round must stop
  // it). A record in force that is older than a third of the bucket's max age is written again
  // (compare-and-set: one instance wins), so that it outlives the max age.
  const BusHoldView& CheckBusHold(natsConnection* connection, int cluster_size,
                                  int64_t now_unix_ms);
  // Writes a bus hold (replacing one in force), or deletes it; bus_hold() follows.
  Status WriteBusHold(natsConnection* connection, int cluster_size, const BusHold& hold);
  Status DeleteBusHold(natsConnection* connection, int cluster_size);

  const Lease& lease() const { return lease_; }
  const LeaseState& state() const { return lease_.state(); }
  const BusHoldView& bus_hold() const { return bus_hold_; }
  // What a round found of the bucket's replicas (raised, or why not: KvLeaseStore::Open) when
  // that changed since the last one taken; empty otherwise. For the log, once per change.
  std::string TakeReplicasNote();
  // The same of the bucket's max age (raised to the time to live, or why not).
  std::string TakeMaxAgeNote();

 private:
  Result<std::unique_ptr<KvLeaseStore>> Open(natsConnection* connection, int cluster_size);
  void ReadBusHold(KvLeaseStore& store, int64_t now_unix_ms);

  LeaseSettings settings_;
  Lease lease_;
  BusHoldView bus_hold_{std::nullopt, "not read yet"};
  OnceNote replicas_note_;
  OnceNote max_age_note_;
};

// "<pod name>-<random>": $HOSTNAME (the pod name in Kubernetes), else gethostname(), and 32 bits
// from std::random_device.
std::string NewLeaseIdentity();

}  // namespace mesh::reconciler
