// Synthetic observations for benchmarks and tests of the pure planner: what the observers would
// report for a bus that holds exactly the desired state (converged), and variations of it.
//
// Pure; thread-safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>

#include "model/desired.h"
#include "observers/observed.h"

namespace mesh::testing {

// The users file's modification time and the server's configuration load time (after it) in a
// converged observation, in nanoseconds since the epoch.
inline constexpr int64_t kConvergedUsersFileMtimeNs = 1'000'000;
inline constexpr int64_t kConvergedConfigLoadTimeNs = 2'000'000;

// A converged bus: every desired stream and consumer as the observers normalise them, the users
// file on disk as `users_file_bytes` and loaded by the server, a healthy monitored server whose
// JetStream cluster has desired.replicas servers.
observers::ObservedState ConvergedObservation(const model::DesiredState& desired,
                                              const std::string& users_file_bytes);

// `converged` with every `every`-th stream and consumer changed in a field the server updates in
// place (a stream's max_msgs, a consumer's max_deliver).
observers::ObservedState DriftedObservation(const observers::ObservedState& converged, int every);

}  // namespace mesh::testing
