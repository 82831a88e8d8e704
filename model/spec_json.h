// Writing the model's values as pretty-printed JSON: the field helpers and the stream and
// consumer specs, shared by the desired-state JSON (model/desired_json.cc) and the pass report
// (reconciler/pass/report.cc), so that both spell a spec the same way.
//
// Pure; thread-safety: free functions over a caller-owned writer.
#pragma once

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/desired.h"

namespace mesh::model::json {

using Writer = rapidjson::PrettyWriter<rapidjson::StringBuffer>;

void String(Writer& w, const std::string& value);
void Field(Writer& w, const char* key, const std::string& value);
void Field(Writer& w, const char* key, const char* value);
void Field(Writer& w, const char* key, int64_t value);
void Field(Writer& w, const char* key, const std::vector<std::string>& values);
void BoolField(Writer& w, const char* key, bool value);

// A stream spec as an object: name, subjects, retention, storage, replicas, max_age_ns,
// max_msgs, max_bytes, discard, description (enum values in the JetStream API's spelling).
void WriteStreamSpec(Writer& w, const StreamSpec& s);

// A consumer spec's fields (stream, durable, filter_subject, deliver_subject, deliver_group,
// ack_policy, deliver_policy, replay_policy, ack_wait_ns, max_deliver) into an object the caller
// has started, so that a caller may add fields of its own before ending it.
void WriteConsumerSpecFields(Writer& w, const ConsumerSpec& c);

}  // namespace mesh::model::json
