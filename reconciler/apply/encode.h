// The bodies of the JetStream API requests apply sends: stream and consumer creates, and
// updates that start from the config the server holds. Pure: JSON text in, JSON text out.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "model/desired.h"

namespace mesh::reconciler {

// Encoding for create requests: a config of the owned fields (the server fills in its defaults).
std::string EncodeStreamConfig(const model::StreamSpec& spec);

// What a consumer create/update request asks for (nats-server 2.10 added "action"; 2.9 reads
// no such field and a durable create with another config silently updates).
enum class ConsumerRequest {
  kLegacy,  // no "action": create or update ($JS.API.CONSUMER.DURABLE.CREATE, 2.9)
  kCreate,  // "action":"create": refused (10148) when it exists with another config
  kUpdate,  // "action":"update": refused (10149) when it does not exist
};
// The body of a consumer create/update: {"stream_name":..,"config":..[,"action":..]}.
std::string EncodeConsumerCreate(const model::ConsumerSpec& spec,
                                 ConsumerRequest request = ConsumerRequest::kLegacy);

// Updates: the server replaces the whole config, so an update starts from the config the
// server holds (`observed_config`, ObservedStream::raw_config) and sets only the owned fields
// (docs/conventions.md section 7) from `spec`; every other field (compression, metadata,
// allow_direct, max_msgs_per_subject, max_ack_pending, inactive_threshold, ...) is sent back as
// the server holds it. An empty or unparseable `observed_config` falls back to the create body.
std::string EncodeStreamUpdate(const model::StreamSpec& spec, std::string_view observed_config);
std::string EncodeConsumerUpdate(const model::ConsumerSpec& spec, std::string_view observed_config,
                                 ConsumerRequest request = ConsumerRequest::kLegacy);

}  // namespace mesh::reconciler
