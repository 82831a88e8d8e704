// What the live bus holds, as read by the observers: plain values, normalised so that an
// object the reconciler created compares equal to its desired spec. The planner reads only
// this and the desired state; it never talks to the bus.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/enum_names.h"

namespace mesh::observers {

struct ObservedStream {
  model::StreamSpec config;  // normalised: subjects sorted, durations in ns, defaults explicit
  // The server's whole "config" object as it answered (compact JSON): an update starts from
  // it and changes only the owned fields, because the server replaces the whole config.
  std::string raw_config;
  // Non-empty when a field could not be decoded (e.g. an enum value this build does not know):
  // `config` then holds the server default for that field and must not be acted on. A problem
  // of this object only, never of the observation.
  std::string problem;
  // The stream's own limit on its consumers ("max_consumers"; not a field the mesh owns): 0 or
  // -1 when it has none, and then the server's default applies (ObservedServer).
  int64_t max_consumers = -1;
  // How many consumers the server counts on it ("state.consumer_count", ephemerals included);
  // -1 when the answer did not say.
  int64_t consumer_count = -1;
};

struct ObservedConsumer {
  model::ConsumerSpec config;  // normalised like streams; `durable` empty for an ephemeral
  std::string raw_config;      // as for streams
  std::string problem;         // as for streams
};

// An object a clustered server's list names in "missing": no leader described it in time (an
// election under way, a member slow), or every member holding it is offline (the server then
// lists the config it assigned, which is not what a leader holds). The list says only that it
// exists. A problem of that object, never of the observation: a stream of another tenant on a
// member that is down must not stop the mesh's passes.
struct UndescribedObject {
  StreamName stream;
  ConsumerName consumer;  // empty for a stream
  // The server's words when it gives a reason (2.14's "offline" map), else what the list says.
  std::string reason;
  bool operator==(const UndescribedObject&) const = default;
};

struct ObservedJetStream {
  std::vector<ObservedStream> streams;  // sorted by name; every stream of the account
  // Sorted by (stream, durable); only on the streams the scope owns (ObserveScope).
  std::vector<ObservedConsumer> consumers;
  // Named in a list's "missing" and so in neither of the above; sorted by (stream, consumer).
  // Consumers only on the streams in scope, as above.
  std::vector<UndescribedObject> undescribed;
  // JetStream servers in the cluster as far as the bus shows it: 1 when no stream reports a
  // cluster group (standalone, or an empty account), else the largest stream group (leader +
  // replicas). A lower bound: a non-system user cannot ask the meta group for its size. Prefer
  // JetStreamClusterSize(), which uses the monitoring endpoint's exact answer when there is one.
  int cluster_size = 1;
  int api_requests = 0;  // how many JetStream API requests the observation took
};

struct ObservedUsersFile {
  enum class State { kAbsent, kUnreadable, kPresent };
  // What the path itself is. A symbolic link is never followed (its target may be anybody's
  // file, world-readable): it is reported as such, with no bytes.
  enum class Kind { kRegularFile, kSymlink };
  State state = State::kAbsent;
  std::string bytes;               // when kPresent and a regular file
  int64_t mtime_unix_ns = 0;       // when kPresent and a regular file
  std::string error;               // when kUnreadable: why (no secret content)
  Kind kind = Kind::kRegularFile;  // when kPresent
  uint32_t mode = 0;               // permission bits (st_mode & 07777), when a regular file
  int64_t owner_uid = -1;          // st_uid, when a regular file
};

// A stream or consumer that the server's full /healthz reports unhealthy, in its own words
// (e.g. "JetStream stream 'MESH > DECL' could not be recovered"). Information about that object,
// never a reason to skip the others.
struct ObjectHealth {
  enum class Kind { kStream, kConsumer };
  Kind kind = Kind::kStream;
  std::string account;
  std::string stream;
  std::string consumer;  // kConsumer only
  std::string error;     // the server's words
  bool operator==(const ObjectHealth&) const = default;
};
inline constexpr EnumNames<ObjectHealth::Kind, 2> kObjectHealthKindNames{{{
    {ObjectHealth::Kind::kStream, "stream"},
    {ObjectHealth::Kind::kConsumer, "consumer"},
}}};
static_assert(kObjectHealthKindNames.Dense());

struct ObservedServer {
  bool monitor_configured = false;  // --monitor given
  bool reachable = false;           // /varz answered
  // The readiness gate: the server can answer for its JetStream state (up, JetStream enabled,
  // and in a cluster a meta leader known and current). Not the full /healthz, which also fails
  // for any one stream being deleted or unrecoverable (docs/architecture.md, "Readiness").
  bool ready = false;
  std::string not_ready_reason;  // the server's (or the transport's) words when not ready
  // What the full /healthz reports per stream and consumer (all of them from 2.10 on, with
  // details=true; the first one only on 2.9, which has no details).
  std::vector<ObjectHealth> unhealthy;
  // /varz config_load_time as Unix ns; 0 when unknown.
  int64_t config_load_time_unix_ns = 0;
  std::string server_name;
  std::string version;
  // The JetStream servers: the larger of /jsz meta_cluster.cluster_size (the meta group,
  // offline peers included) and the servers /routez shows routes to, plus this one (the meta
  // group's count can lag); 1 for a standalone JetStream server; 0 when unknown (no monitor,
  // unreachable, JetStream disabled).
  int jetstream_cluster_size = 0;
  // /jsz limits.default_max_consumers: from nats-server 2.15 on (default 1000, the server's
  // jetstream { limits { default_max_consumers } }), how many consumers a stream without a
  // max_consumers of its own may hold; beyond it a create is refused (10026). 0 when the server
  // sets no such default (2.14 and before) or it is unknown (no monitor).
  int64_t default_max_consumers = 0;
};

struct ObservedState {
  ObservedJetStream jetstream;
  ObservedUsersFile users_file;
  ObservedServer server;
};

// The number of JetStream servers to check bus.replicas against: the monitoring endpoint's
// exact count when known, else the bus's lower bound.
inline int JetStreamClusterSize(const ObservedState& state) {
  return state.server.jetstream_cluster_size > 0 ? state.server.jetstream_cluster_size
                                                 : state.jetstream.cluster_size;
}

}  // namespace mesh::observers
