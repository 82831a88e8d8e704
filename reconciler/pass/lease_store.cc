#include "reconciler/pass/lease_store.h"

#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <random>
#include <utility>

namespace mesh::reconciler {

LeaseKeeper::LeaseKeeper(LeaseSettings settings)
    : settings_(std::move(settings)), lease_(settings_.identity) {}

Result<std::unique_ptr<KvLeaseStore>> LeaseKeeper::Open(natsConnection* connection,
                                                        int cluster_size) {
  return KvLeaseStore::Open(connection, settings_.ttl, std::min(cluster_size, kMaxLeaseReplicas),
                            settings_.request_timeout);
}

LeaseState LeaseKeeper::Round(natsConnection* connection, int cluster_size,
                              LeaseClock::time_point now, int64_t now_unix_ms) {
  auto store = Open(connection, cluster_size);
  if (!store.ok()) {
    bus_hold_ = {std::nullopt, store.status().ToString()};
    return lease_.Unreachable(store.status().ToString());
  }
  replicas_note_.Offer((*store)->replicas_note());
  max_age_note_.Offer((*store)->max_age_note());
  LeaseState state = lease_.TryAcquireOrRenew(**store, now);
  ReadBusHold(**store, now_unix_ms);
  return state;
}

Status LeaseKeeper::Release(natsConnection* connection, int cluster_size) {
  if (!lease_.MayHold()) return Status::Ok();
  auto store = Open(connection, cluster_size);
  if (!store.ok()) {
    lease_.Unreachable(store.status().ToString());  // stop acting all the same
    return store.status();
  }
  return lease_.Release(**store);
}

const BusHoldView& LeaseKeeper::CheckBusHold(natsConnection* connection, int cluster_size,
                                             int64_t now_unix_ms) {
  auto store = Open(connection, cluster_size);
  if (!store.ok()) {
    bus_hold_ = {std::nullopt, store.status().ToString()};
  } else {
    ReadBusHold(**store, now_unix_ms);
  }
  return bus_hold_;
}

void OnceNote::Offer(const std::string& text) {
  if (text.empty() || text == last_) return;
  last_ = text;
  pending_ = text;
}

std::string OnceNote::Take() {
  return std::exchange(pending_, {});
}

std::string LeaseKeeper::TakeReplicasNote() {
  return replicas_note_.Take();
}

std::string LeaseKeeper::TakeMaxAgeNote() {
  return max_age_note_.Take();
}

void LeaseKeeper::ReadBusHold(KvLeaseStore& store, int64_t now_unix_ms) {
  Result<std::optional<KvLeaseStore::StoredBusHold>> stored = store.GetBusHold();
  if (!stored.ok()) {
    bus_hold_ = {std::nullopt, stored.status().ToString()};
    return;
  }
  bus_hold_ = {};
  if (!stored->has_value()) return;
  Result<BusHold> hold = ParseBusHold((*stored)->value);
  // Another program's value under the key holds nothing; the record is ours to overwrite.
  if (!hold.ok() || !InForce(*hold, now_unix_ms)) return;
  bus_hold_.hold = *hold;
  const auto age = std::chrono::milliseconds(now_unix_ms - (*stored)->stored_unix_ms);
  if (NeedsRefresh(age, store.ttl())) {
    // Lost to another instance, or no answer: the next round tries again, long before the
    // record could age out.
    (void)store.RefreshBusHold((*stored)->value, (*stored)->revision);
  }
}

Status LeaseKeeper::WriteBusHold(natsConnection* connection, int cluster_size,
                                 const BusHold& hold) {
  auto store = Open(connection, cluster_size);
  if (!store.ok()) return store.status();
  Status written = (*store)->PutBusHold(EncodeBusHold(hold));
  if (written.ok()) bus_hold_ = {hold, ""};
  return written;
}

Status LeaseKeeper::DeleteBusHold(natsConnection* connection, int cluster_size) {
  auto store = Open(connection, cluster_size);
  if (!store.ok()) return store.status();
  Status deleted = (*store)->DeleteBusHold();
  if (deleted.ok()) bus_hold_ = {};
  return deleted;
}

std::string NewLeaseIdentity() {
  std::string host;
  if (const char* name = std::getenv("HOSTNAME"); name != nullptr && *name != '\0') {
    host = name;
  } else {
    char buffer[256] = {0};
    if (gethostname(buffer, sizeof buffer - 1) == 0) host = buffer;
  }
  std::random_device random;
  return LeaseIdentity(host, static_cast<uint32_t>(random()));
}

}  // namespace mesh::reconciler
