// What the live bus holds, as read by the observers: plain values, normalised so that an
// object the reconciler created compares equal to its desired spec. The planner reads only
// this and the desired state; it never talks to the bus.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/desired.h"

namespace mesh::observers {

struct ObservedStream {
  model::StreamSpec config;  // normalised: subjects sorted, durations in ns, defaults explicit
  // Cluster view, when the server is clustered: the leader and the replicas that are current.
  std::string leader;
};

struct ObservedConsumer {
  model::ConsumerSpec config;  // normalised like streams; `durable` empty for an ephemeral
};

struct ObservedJetStream {
  std::vector<ObservedStream> streams;      // sorted by name; every stream of the account
  std::vector<ObservedConsumer> consumers;  // sorted by (stream, durable); on every stream
  int cluster_size = 1;  // JetStream servers in the cluster (1 when standalone)
  int api_requests = 0;  // how many JetStream API requests the observation took
};

struct ObservedUsersFile {
  enum class State { kAbsent, kUnreadable, kPresent };
  State state = State::kAbsent;
  std::string bytes;            // when kPresent
  int64_t mtime_unix_ns = 0;    // when kPresent
  std::string error;            // when kUnreadable: why (no secret content)
};

struct ObservedServer {
  bool monitor_configured = false;  // --monitor given
  bool reachable = false;           // /varz answered
  bool healthy = false;             // /healthz answered ok (JetStream store recovered)
  std::string health_error;         // /healthz's reason when not healthy
  // /varz config_load_time as Unix ns; 0 when unknown.
  int64_t config_load_time_unix_ns = 0;
  std::string server_name;
  std::string version;
};

struct ObservedState {
  ObservedJetStream jetstream;
  ObservedUsersFile users_file;
  ObservedServer server;
};

}  // namespace mesh::observers
