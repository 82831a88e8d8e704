// The lease's store over JetStream KV (reconciler/plan/lease.h's LeaseStore), with cnats' KV
// API on the reconciler's own bus connection: the bucket opened (created, or raised to the
// replicas and max age wanted), the lease and the bus hold read and written. In apply/, the
// layer that writes to the bus; the rounds that use it are the pass's (pass/lease_store.h).
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
#include <cstdint>
#include <memory>
#include <optional>
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

}  // namespace mesh::reconciler
