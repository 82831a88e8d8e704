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

#include "model/names.h"
#include "model/records.h"

namespace mesh::model {

enum class Retention { kLimits, kInterest, kWorkQueue };
enum class Storage { kFile, kMemory };
enum class Discard { kOld, kNew };
enum class AckPolicy { kNone, kAll, kExplicit };
enum class DeliverPolicy { kAll, kLast, kNew, kByStartSequence, kByStartTime, kLastPerSubject };
enum class ReplayPolicy { kInstant, kOriginal };

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
