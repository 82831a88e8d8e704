#include "reconciler/apply/kv_lease_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "observers/c_handle.h"
#include "observers/nats_error.h"

namespace mesh::reconciler {
namespace {

using JsPtr = CHandle<jsCtx, jsCtx_Destroy>;
using KvPtr = CHandle<kvStore, kvStore_Destroy>;
using KvStatusPtr = CHandle<kvStatus, kvStatus_Destroy>;
using KvEntryPtr = CHandle<kvEntry, kvEntry_Destroy>;
using PubAckPtr = CHandle<jsPubAck, jsPubAck_Destroy>;
using StreamInfoPtr = CHandle<jsStreamInfo, jsStreamInfo_Destroy>;

constexpr char kBucketDescription[] = "mesh-reconciler lease: which instance acts on JetStream";
constexpr int64_t kNanosPerMilli = 1'000'000;

}  // namespace

struct KvLeaseStore::Handles {
  JsPtr js;  // declared first: destroyed after the KV handle
  KvPtr kv;
};

KvLeaseStore::KvLeaseStore() : handles_(std::make_unique<Handles>()) {}
KvLeaseStore::~KvLeaseStore() = default;

Result<std::unique_ptr<KvLeaseStore>> KvLeaseStore::Open(natsConnection* connection,
                                                         std::chrono::milliseconds ttl,
                                                         int replicas,
                                                         std::chrono::milliseconds timeout) {
  if (connection == nullptr) return Status(Errc::kUnavailable, "lease: no bus connection");
  std::unique_ptr<KvLeaseStore> store(new KvLeaseStore());
  store->timeout_ = timeout;
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = timeout.count();
  jsCtx* raw_js = nullptr;
  natsStatus s = natsConnection_JetStream(&raw_js, connection, &options);
  store->handles_->js.reset(raw_js);
  if (s != NATS_OK) return observers::NatsError(s, "lease: JetStream context");

  kvStore* raw_kv = nullptr;
  s = js_KeyValue(&raw_kv, store->handles_->js.get(), kLeaseBucket);
  store->handles_->kv.reset(raw_kv);
  const int wanted = std::clamp(replicas, 1, kMaxLeaseReplicas);
  bool made_now = false;
  if (s == NATS_NOT_FOUND) {
    kvConfig config;
    kvConfig_Init(&config);
    config.Bucket = kLeaseBucket;
    config.Description = kBucketDescription;
    config.History = 1;
    config.TTL = ttl.count() * kNanosPerMilli;
    config.StorageType = js_FileStorage;
    // With a member down (or one that nats-server 2.10.27 left outside its meta group at
    // formation) `wanted` replicas cannot be placed, and without a bucket no instance could
    // hold the lease and nothing would be repaired. So fewer are tried, down to one; a later
    // round raises them (RaiseReplicas) once they can be placed.
    std::optional<Status> first_error;
    for (int tried = wanted; tried >= 1; --tried) {
      config.Replicas = tried;
      s = js_CreateKeyValue(&raw_kv, store->handles_->js.get(), &config);
      store->handles_->kv.reset(raw_kv);
      if (s == NATS_OK) {
        made_now = true;
        if (tried < wanted) {
          store->replicas_note_ = "the lease bucket was made with " + std::to_string(tried) +
                                  " replica(s), " + std::to_string(wanted) +
                                  " wanted: " + first_error->message();
        }
        break;
      }
      const Status create_error =
          observers::NatsError(s, std::string("lease: create bucket ") + kLeaseBucket + " with " +
                                      std::to_string(tried) + " replica(s)");
      if (!first_error) first_error = create_error;
      // Another instance may have created it meanwhile (perhaps with other replicas): use it.
      s = js_KeyValue(&raw_kv, store->handles_->js.get(), kLeaseBucket);
      store->handles_->kv.reset(raw_kv);
      if (s == NATS_OK) break;
    }
    if (s != NATS_OK) {  // say why it could not be created, not only that it is not there
      return Status(first_error->code(),
                    first_error->message() + "; then open: " + natsStatus_GetText(s));
    }
  }
  if (s != NATS_OK) {
    return observers::NatsError(s, std::string("lease: open bucket ") + kLeaseBucket);
  }

  kvStatus* raw_status = nullptr;
  s = kvStore_Status(&raw_status, store->handles_->kv.get());
  KvStatusPtr status(raw_status);
  if (s != NATS_OK) {
    return observers::NatsError(s, std::string("lease: status of bucket ") + kLeaseBucket);
  }
  store->ttl_ = std::chrono::milliseconds(kvStatus_TTL(status.get()) / kNanosPerMilli);
  if (store->ttl_.count() <= 0) {
    return Status(Errc::kInvalidArgument, std::string("lease: bucket ") + kLeaseBucket +
                                              " has no max age, so a dead holder never expires");
  }
  if (!made_now) {
    store->RaiseBucket(static_cast<int>(kvStatus_Replicas(status.get())), wanted, ttl);
  }
  return store;
}

// What an existing bucket may lack, raised in one update of its own configuration (never
// lowered):
// - replicas: a bucket made while the cluster showed fewer members (a pod started before its
//   peers) keeps the replicas it was made with. With 2 of 3, losing either member leaves its
//   group without a quorum: no entry can be read, aged out or written, and no instance can hold
//   the lease until that member is back. So an instance that counts more members raises them.
// - max age: a bucket made by an instance with a shorter time to live (an earlier release, whose
//   time to live did not cover the request timeout; or a shorter --interval). A holder acts only
//   while a write would end under the lease (AccessForWrite), so with a max age under the time to
//   live it wants it could act too little, or not at all. Raised, ttl() is the new max age.
void KvLeaseStore::RaiseBucket(int has_replicas, int wanted_replicas,
                               std::chrono::milliseconds wanted_ttl) {
  const bool more_replicas = has_replicas < wanted_replicas;
  const bool longer = ttl_ < wanted_ttl;
  if (!more_replicas && !longer) return;
  const std::string stream = std::string("KV_") + kLeaseBucket;
  jsOptions options;
  jsOptions_Init(&options);
  options.Wait = timeout_.count();
  jsStreamInfo* raw_info = nullptr;
  jsErrCode error_code = static_cast<jsErrCode>(0);
  natsStatus s =
      js_GetStreamInfo(&raw_info, handles_->js.get(), stream.c_str(), &options, &error_code);
  StreamInfoPtr info(raw_info);
  if (s == NATS_OK && info->Config != nullptr) {
    // Everything else as it is.
    if (more_replicas) info->Config->Replicas = wanted_replicas;
    if (longer) info->Config->MaxAge = wanted_ttl.count() * kNanosPerMilli;
    jsStreamInfo* raw_updated = nullptr;
    s = js_UpdateStream(&raw_updated, handles_->js.get(), info->Config, &options, &error_code);
    StreamInfoPtr updated(raw_updated);
  }
  const std::string outcome =
      s == NATS_OK ? ": raised"
                   : ": not raised: " + observers::NatsError(s, "update " + stream).message();
  if (more_replicas) {
    replicas_note_ = "the lease bucket has " + std::to_string(has_replicas) + " replica(s), " +
                     std::to_string(wanted_replicas) + " wanted" + outcome;
  }
  if (longer) {
    max_age_note_ = "the lease bucket's max age is " + std::to_string(ttl_.count()) + " ms, " +
                    std::to_string(wanted_ttl.count()) + " ms wanted" + outcome;
    if (s == NATS_OK) ttl_ = wanted_ttl;
  }
}

Result<uint64_t> KvLeaseStore::Write(const std::string& holder, uint64_t last_revision) {
  jsPubOptions options;
  jsPubOptions_Init(&options);
  options.MaxWait = timeout_.count();
  if (last_revision == 0) {
    options.ExpectNoMessage = true;  // Nats-Expected-Last-Subject-Sequence: 0
  } else {
    options.ExpectLastSubjectSeq = last_revision;
  }
  const std::string subject = LeaseSubject();
  jsPubAck* raw_ack = nullptr;
  jsErrCode error_code = static_cast<jsErrCode>(0);
  natsStatus s = js_Publish(&raw_ack, handles_->js.get(), subject.c_str(), holder.data(),
                            static_cast<int>(holder.size()), &options, &error_code);
  PubAckPtr ack(raw_ack);
  if (s == NATS_OK) return ack->Sequence;
  Status failed = observers::NatsError(s, "lease: write " + subject);
  if (error_code == JSStreamWrongLastSequenceErr) {
    return Status(Errc::kRefused, failed.message());
  }
  return failed;
}

Result<uint64_t> KvLeaseStore::Create(const std::string& holder) {
  return Write(holder, 0);
}

Result<uint64_t> KvLeaseStore::Update(const std::string& holder, uint64_t last_revision) {
  if (last_revision == 0) return Status(Errc::kInvalidArgument, "lease: update without revision");
  return Write(holder, last_revision);
}

Result<std::optional<LeaseEntry>> KvLeaseStore::Get() {
  kvEntry* raw_entry = nullptr;
  natsStatus s = kvStore_Get(&raw_entry, handles_->kv.get(), kLeaseKey);
  KvEntryPtr entry(raw_entry);
  if (s == NATS_NOT_FOUND) return std::optional<LeaseEntry>();
  if (s != NATS_OK) return observers::NatsError(s, "lease: read " + LeaseSubject());
  LeaseEntry found;
  const char* value = static_cast<const char*>(kvEntry_Value(entry.get()));
  found.holder.assign(value == nullptr ? "" : value,
                      static_cast<size_t>(std::max(0, kvEntry_ValueLen(entry.get()))));
  found.revision = kvEntry_Revision(entry.get());
  return std::optional<LeaseEntry>(std::move(found));
}

Result<std::optional<KvLeaseStore::StoredBusHold>> KvLeaseStore::GetBusHold() {
  kvEntry* raw_entry = nullptr;
  natsStatus s = kvStore_Get(&raw_entry, handles_->kv.get(), kBusHoldKey);
  KvEntryPtr entry(raw_entry);
  if (s == NATS_NOT_FOUND) return std::optional<StoredBusHold>();
  if (s != NATS_OK) return observers::NatsError(s, "bus hold: read " + BusHoldSubject());
  StoredBusHold found;
  const char* value = static_cast<const char*>(kvEntry_Value(entry.get()));
  found.value.assign(value == nullptr ? "" : value,
                     static_cast<size_t>(std::max(0, kvEntry_ValueLen(entry.get()))));
  found.revision = kvEntry_Revision(entry.get());
  found.stored_unix_ms = kvEntry_Created(entry.get()) / kNanosPerMilli;
  return std::optional<StoredBusHold>(std::move(found));
}

Status KvLeaseStore::PutBusHold(const std::string& value) {
  uint64_t revision = 0;
  natsStatus s = kvStore_Put(&revision, handles_->kv.get(), kBusHoldKey, value.data(),
                             static_cast<int>(value.size()));
  if (s != NATS_OK) return observers::NatsError(s, "bus hold: write " + BusHoldSubject());
  return Status::Ok();
}

Status KvLeaseStore::RefreshBusHold(const std::string& value, uint64_t revision) {
  uint64_t written = 0;
  natsStatus s = kvStore_Update(&written, handles_->kv.get(), kBusHoldKey, value.data(),
                                static_cast<int>(value.size()), revision);
  if (s != NATS_OK) return observers::NatsError(s, "bus hold: write again " + BusHoldSubject());
  return Status::Ok();
}

Status KvLeaseStore::DeleteBusHold() {
  natsStatus s = kvStore_Delete(handles_->kv.get(), kBusHoldKey);
  if (s != NATS_OK) return observers::NatsError(s, "bus hold: delete " + BusHoldSubject());
  return Status::Ok();
}

}  // namespace mesh::reconciler
