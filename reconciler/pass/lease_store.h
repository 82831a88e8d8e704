// The effectful shell of the lease (reconciler/plan/lease.h): the LeaseStore over JetStream KV,
// with cnats' KV API on the reconciler's own bus connection, and the LeaseKeeper that runs one
// lease round per pass.
//
// Requests: opening the bucket is one $JS.API.STREAM.INFO (plus a STREAM.CREATE when it is
// absent, or a STREAM.INFO and a STREAM.UPDATE when it has fewer replicas or a shorter max age
// than wanted); a read is one $JS.API.DIRECT.GET; a write is one publish to
// "$KV.mesh_reconciler_lease.holder" with the Nats-Expected-Last-Subject-Sequence header
// (0 to create), answered by the stream's leader.
//
// Ownership: KvLeaseStore owns its JetStream context and KV handle (unique_ptrs with the matching
// destroy functions); it does not own the natsConnection, which must outlive it.
// Thread-safety: use from the thread that owns the connection (the reconcile thread).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <string>

#include "model/result.h"
#include "reconciler/plan/bus_hold.h"
#include "reconciler/plan/lease.h"

namespace mesh::reconciler {

inline constexpr int kMaxLeaseReplicas = 3;

class KvLeaseStore : public LeaseStore {
 public:
  // Binds to the bucket kLeaseBucket on `connection`, creating it when absent (history 1, max
  // age `ttl`, `replicas` replicas, file storage; fewer, down to one, when that many cannot be
  // placed). An existing bucket is used as it is (ttl() reports its own max age), except that
  // one with fewer than `replicas` replicas, or a max age under `ttl`, is raised to them (never
  // lowered; RaiseBucket). replicas_note() says when the bucket was made with fewer replicas,
  // raised, or could not be raised, and why; max_age_note() the same of its max age.
  static Result<std::unique_ptr<KvLeaseStore>> Open(natsConnection* connection,
                                                    std::chrono::milliseconds ttl, int replicas,
                                                    std::chrono::milliseconds timeout);
  ~KvLeaseStore() override;
  KvLeaseStore(const KvLeaseStore&) = delete;
  KvLeaseStore& operator=(const KvLeaseStore&) = delete;

  Result<uint64_t> Create(const std::string& holder) override;
  Result<uint64_t> Update(const std::string& holder, uint64_t last_revision) override;
  Result<std::optional<LeaseEntry>> Get() override;
  std::chrono::milliseconds ttl() const override { return ttl_; }

  // The bus hold's record (reconciler/plan/bus_hold.h), beside the lease in the same bucket.
  struct StoredBusHold {
    std::string value;  // as stored (ParseBusHold reads it)
    uint64_t revision = 0;
    int64_t stored_unix_ms = 0;  // the server's store time
  };
  // nullopt: no record (never written, deleted, or aged out).
  Result<std::optional<StoredBusHold>> GetBusHold();
  // Writes the record whatever is there (a new hold replaces the one in force).
  Status PutBusHold(const std::string& value);
  // Writes it again when its revision is still `revision` (an error otherwise: another instance
  // wrote it first, or no answer; the next round tries again).
  Status RefreshBusHold(const std::string& value, uint64_t revision);
  Status DeleteBusHold();

  // Empty when the bucket had its replicas; else what Open found and did about it.
  const std::string& replicas_note() const { return replicas_note_; }
  // Empty when the bucket's max age was at least the time to live wanted; else what Open did.
  const std::string& max_age_note() const { return max_age_note_; }

 private:
  KvLeaseStore();
  void RaiseBucket(int has_replicas, int wanted_replicas, std::chrono::milliseconds wanted_ttl);
  Result<uint64_t> Write(const std::string& holder, uint64_t last_revision);

  struct Handles;
  std::unique_ptr<Handles> handles_;
  std::chrono::milliseconds ttl_{0};
  std::chrono::milliseconds timeout_{0};
  std::string replicas_note_;
  std::string max_age_note_;
};

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
