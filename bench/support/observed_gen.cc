#include "bench/support/observed_gen.h"

namespace mesh::testing {

observers::ObservedState ConvergedObservation(const model::DesiredState& desired,
                                              const std::string& users_file_bytes) {
  observers::ObservedState observed;
  for (const model::StreamSpec& s : desired.streams)
    observed.jetstream.streams.push_back({s, "", ""});
  for (const model::ConsumerSpec& c : desired.consumers) {
    observed.jetstream.consumers.push_back({c, "", ""});
  }
  observed.jetstream.cluster_size = desired.replicas;
  observed.users_file.state = observers::ObservedUsersFile::State::kPresent;
  observed.users_file.bytes = users_file_bytes;
  observed.users_file.mtime_unix_ns = kConvergedUsersFileMtimeNs;
  observed.users_file.mode = 0600;  // as the reconciler writes it
  observed.server.monitor_configured = true;
  observed.server.reachable = true;
  observed.server.ready = true;
  observed.server.config_load_time_unix_ns = kConvergedConfigLoadTimeNs;
  observed.server.jetstream_cluster_size = desired.replicas;
  return observed;
}

observers::ObservedState DriftedObservation(const observers::ObservedState& converged, int every) {
  observers::ObservedState observed = converged;
  if (every <= 0) return observed;
  for (size_t i = 0; i < observed.jetstream.streams.size(); i += static_cast<size_t>(every)) {
    observed.jetstream.streams[i].config.max_msgs = 1000;
  }
  for (size_t i = 0; i < observed.jetstream.consumers.size(); i += static_cast<size_t>(every)) {
    observed.jetstream.consumers[i].config.max_deliver = 3;
  }
  return observed;
}

}  // namespace mesh::testing
