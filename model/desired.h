// The desired bus state, derived from the records by exactly the rules of the contract
// (sections 2 to 4): JetStream streams, durable push consumers, and every principal's
// permissions. Pure and deterministic: same records, same output, same order.
//
// Thread-safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/enum_names.h"
#include "model/names.h"
#include "model/records.h"

namespace mesh::model {

enum class Retention { kLimits, kInterest, kWorkQueue };
inline constexpr EnumNames<Retention, 3> kRetentionNames{{{
    {Retention::kLimits, "limits"},
    {Retention::kInterest, "interest"},
    {Retention::kWorkQueue, "workqueue"},
}}};
static_assert(kRetentionNames.Dense());
enum class Storage { kFile, kMemory };
inline constexpr EnumNames<Storage, 2> kStorageNames{{{
    {Storage::kFile, "file"},
    {Storage::kMemory, "memory"},
}}};
static_assert(kStorageNames.Dense());
enum class Discard { kOld, kNew };
inline constexpr EnumNames<Discard, 2> kDiscardNames{{{
    {Discard::kOld, "old"},
    {Discard::kNew, "new"},
}}};
static_assert(kDiscardNames.Dense());
enum class AckPolicy { kNone, kAll, kExplicit };
inline constexpr EnumNames<AckPolicy, 3> kAckPolicyNames{{{
    {AckPolicy::kNone, "none"},
    {AckPolicy::kAll, "all"},
    {AckPolicy::kExplicit, "explicit"},
}}};
static_assert(kAckPolicyNames.Dense());
enum class DeliverPolicy { kAll, kLast, kNew, kByStartSequence, kByStartTime, kLastPerSubject };
inline constexpr EnumNames<DeliverPolicy, 6> kDeliverPolicyNames{{{
    {DeliverPolicy::kAll, "all"},
    {DeliverPolicy::kLast, "last"},
    {DeliverPolicy::kNew, "new"},
    {DeliverPolicy::kByStartSequence, "by_start_sequence"},
    {DeliverPolicy::kByStartTime, "by_start_time"},
    {DeliverPolicy::kLastPerSubject, "last_per_subject"},
}}};
static_assert(kDeliverPolicyNames.Dense());
enum class ReplayPolicy { kInstant, kOriginal };
inline constexpr EnumNames<ReplayPolicy, 2> kReplayPolicyNames{{{
    {ReplayPolicy::kInstant, "instant"},
    {ReplayPolicy::kOriginal, "original"},
}}};
static_assert(kReplayPolicyNames.Dense());

// JetStream API spellings ("workqueue", "file", "explicit", ...) and back.
const char* ToApi(Retention v);
const char* ToApi(Storage v);
const char* ToApi(Discard v);
const char* ToApi(AckPolicy v);
const char* ToApi(DeliverPolicy v);
const char* ToApi(ReplayPolicy v);

inline constexpr int64_t kNanosPerSecond = 1'000'000'000;
inline constexpr int64_t kAckWaitNanos = 30 * kNanosPerSecond;
inline constexpr int64_t kSeatMaxDeliver = 10;
inline constexpr int64_t kEventsMaxDeliver = 10;
inline constexpr int64_t kUnlimited = -1;

// "mesh <mesh>: managed by mesh-reconciler" - literally, whatever the reconciler's user is.
std::string OwnershipMark(const std::string& mesh);

// Owned stream fields (contract section 6). Subjects are kept sorted and de-duplicated.
struct StreamSpec {
  StreamName name;
  std::vector<std::string> subjects;
  Retention retention = Retention::kLimits;
  Storage storage = Storage::kFile;
  int replicas = 1;
  int64_t max_age_ns = 0;  // 0: unlimited
  int64_t max_msgs = kUnlimited;
  int64_t max_bytes = kUnlimited;
  Discard discard = Discard::kOld;
  std::string description;
  bool operator==(const StreamSpec&) const = default;
};

// Owned consumer fields: everything in the contract's table (section 3).
struct ConsumerSpec {
  StreamName stream;
  ConsumerName durable;
  std::string filter_subject;  // empty: none
  std::string deliver_subject;
  std::string deliver_group;  // empty: none
  AckPolicy ack = AckPolicy::kExplicit;
  DeliverPolicy deliver = DeliverPolicy::kAll;
  ReplayPolicy replay = ReplayPolicy::kInstant;
  int64_t ack_wait_ns = kAckWaitNanos;
  int64_t max_deliver = kUnlimited;
  bool operator==(const ConsumerSpec&) const = default;
};

// A durable consumer's identity and the ack permission that goes with it. The only way to
// name a consumer: the durable name and "$JS.ACK.<stream>.<durable>.>" cannot drift apart.
struct ConsumerId {
  StreamName stream;
  ConsumerName durable;
  std::string AckPermission() const;  // "$JS.ACK.<stream>.<durable>.>"
  auto operator<=>(const ConsumerId&) const = default;
};
ConsumerId ControlConsumer();                          // CONTROL / controller
ConsumerId DeclConsumer(const std::string& node);      // DECL / decl_<node>
ConsumerId SeatWorker(const std::string& seat);        // SEAT_<seat> / worker
ConsumerId EventConsumer(const std::string& follower,  // EVENTS / ev_<f>_<seat>_<event>
                         const FollowRef& follow);
// Whether `durable` on `stream` has the shape the functions above give a mesh consumer there
// (controller on CONTROL, decl_<name> on DECL, worker on SEAT_<seat>, ev_<name>_<name>_<name>
// on EVENTS, each <name> a valid records name): one the records derive, or one they derived
// once and no longer do (an unexpected durable of the mesh's). A server-named ephemeral (eight
// random letters and digits) never has it.
bool HasMeshDurableShape(std::string_view stream, std::string_view durable);

enum class PrincipalKind { kReconciler, kController, kNode, kModule };
inline constexpr EnumNames<PrincipalKind, 4> kPrincipalKindNames{{{
    {PrincipalKind::kReconciler, "reconciler"},
    {PrincipalKind::kController, "controller"},
    {PrincipalKind::kNode, "node"},
    {PrincipalKind::kModule, "module"},
}}};
static_assert(kPrincipalKindNames.Dense());
const char* ToString(PrincipalKind kind);

struct Principal {
  UserName user;
  PrincipalKind kind = PrincipalKind::kNode;
  Credential credential;                   // kNone: left out of the users file
  std::vector<std::string> publish_allow;  // sorted, de-duplicated
  std::vector<std::string> subscribe_allow;
  bool operator==(const Principal&) const = default;
};

// The reconciler's own principal, from its settings (not from the records).
struct ReconcilerIdentity {
  UserName user{std::string("mesh-reconciler")};
  Credential credential;  // usually kPlain, from MESH_RECONCILER_PASSWORD or --password-file
  // Deliberate extension of the contract's row (section 4), empty unless the lease is on: the
  // lease's KV subject (reconciler/plan/lease.h LeasePublishAllow).
  std::vector<std::string> extra_publish;
};

struct DesiredState {
  std::string mesh;
  std::string account;
  int replicas = 1;
  std::vector<StreamSpec> streams;           // sorted by name
  std::vector<ConsumerSpec> consumers;       // sorted by (stream, durable)
  std::vector<Principal> principals;         // sorted by user name; the reconciler included
  std::vector<UserName> without_credential;  // principals left out of the users file, sorted
};

// Derives the desired state. `records` must have passed validation.
DesiredState Derive(const Records& records, const ReconcilerIdentity& reconciler);

}  // namespace mesh::model
