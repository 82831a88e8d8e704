// The effectful shell of the lease (reconciler/plan/lease.h): the LeaseStore over JetStream KV,
// with cnats' KV API on the reconciler's own bus connection, and the LeaseKeeper that runs one
// lease round per pass.
//
// Requests: opening the bucket is one $JS.API.STREAM.INFO (plus a STREAM.CREATE when it is
// absent); a read is one $JS.API.DIRECT.GET; a write is one publish to
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
#include "reconciler/plan/lease.h"

namespace mesh::reconciler {

inline constexpr int kMaxLeaseReplicas = 3;

class KvLeaseStore : public LeaseStore {
 public:
  // Binds to the bucket kLeaseBucket on `connection`, creating it when absent (history 1, max
  // age `ttl`, `replicas` replicas, file storage). An existing bucket is used as it is: ttl()
  // reports its own max age.
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

 private:
  KvLeaseStore();
  Result<uint64_t> Write(const std::string& holder, uint64_t last_revision);

  struct Handles;
  std::unique_ptr<Handles> handles_;
  std::chrono::milliseconds ttl_{0};
  std::chrono::milliseconds timeout_{0};
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
  LeaseState Round(natsConnection* connection, int cluster_size, LeaseClock::time_point now);

  // Releases the lease when this instance holds it (Lease::Release), on `connection`.
  Status Release(natsConnection* connection, int cluster_size);

  const Lease& lease() const { return lease_; }

 private:
  LeaseSettings settings_;
  Lease lease_;
};

// "<pod name>-<random>": $HOSTNAME (the pod name in Kubernetes), else gethostname(), and 32 bits
// from std::random_device.
std::string NewLeaseIdentity();

}  // namespace mesh::reconciler
