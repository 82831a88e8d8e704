#include "reconciler/apply/encode.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <optional>

#include "model/json_read.h"

namespace mesh::reconciler {
namespace {

using model::ConsumerSpec;
using model::StreamSpec;

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer>;

void Field(JsonWriter& w, const char* key, const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}
void Field(JsonWriter& w, const char* key, int64_t value) {
  w.Key(key);
  w.Int64(value);
}
// Omitted when empty: the API's "absent" and "" mean the same.
void OptionalField(JsonWriter& w, const char* key, const std::string& value) {
  if (!value.empty()) Field(w, key, value);
}

void WriteConsumerConfig(JsonWriter& w, const ConsumerSpec& spec) {
  w.StartObject();
  Field(w, "durable_name", spec.durable.str());
  OptionalField(w, "deliver_subject", spec.deliver_subject);
  OptionalField(w, "deliver_group", spec.deliver_group);
  OptionalField(w, "filter_subject", spec.filter_subject);
  Field(w, "ack_policy", model::ToApi(spec.ack));
  Field(w, "deliver_policy", model::ToApi(spec.deliver));
  Field(w, "replay_policy", model::ToApi(spec.replay));
  Field(w, "ack_wait", spec.ack_wait_ns);
  Field(w, "max_deliver", spec.max_deliver);
  w.EndObject();
}

void WriteAction(JsonWriter& w, ConsumerRequest request) {
  switch (request) {
    case ConsumerRequest::kLegacy:
      return;
    case ConsumerRequest::kCreate:
      Field(w, "action", std::string("create"));
      return;
    case ConsumerRequest::kUpdate:
      Field(w, "action", std::string("update"));
      return;
  }
}

using Allocator = rapidjson::Document::AllocatorType;

rapidjson::Value Text(const std::string& text, Allocator& a) {
  return rapidjson::Value(text.c_str(), static_cast<rapidjson::SizeType>(text.size()), a);
}

// Replaces (or adds) one member of a config object.
void Set(rapidjson::Value& object, const char* key, rapidjson::Value value, Allocator& a) {
  if (auto it = object.FindMember(key); it != object.MemberEnd()) {
    it->value = std::move(value);
  } else {
    object.AddMember(rapidjson::Value(key, a), std::move(value), a);
  }
}

// An owned text field: set, or removed when the spec has none (the API's "absent" and "").
void SetOrRemove(rapidjson::Value& object, const char* key, const std::string& value,
                 Allocator& a) {
  if (value.empty()) {
    object.RemoveMember(key);
  } else {
    Set(object, key, Text(value, a), a);
  }
}

}  // namespace

std::string EncodeStreamConfig(const StreamSpec& spec) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Field(w, "name", spec.name.str());
  w.Key("subjects");
  w.StartArray();
  for (const std::string& subject : spec.subjects) {
    w.String(subject.c_str(), static_cast<rapidjson::SizeType>(subject.size()));
  }
  w.EndArray();
  Field(w, "retention", model::ToApi(spec.retention));
  Field(w, "storage", model::ToApi(spec.storage));
  Field(w, "num_replicas", spec.replicas);
  Field(w, "max_age", spec.max_age_ns);
  Field(w, "max_msgs", spec.max_msgs);
  Field(w, "max_bytes", spec.max_bytes);
  Field(w, "discard", model::ToApi(spec.discard));
  OptionalField(w, "description", spec.description);
  // 0: the server picks min(2 min, max_age), so the window never exceeds max_age (which would
  // be refused) and an update never fights the server over a field the reconciler does not own.
  Field(w, "duplicate_window", int64_t{0});
  w.EndObject();
  return buffer.GetString();
}

std::string EncodeConsumerCreate(const ConsumerSpec& spec, ConsumerRequest request) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Field(w, "stream_name", spec.stream.str());
  w.Key("config");
  WriteConsumerConfig(w, spec);
  WriteAction(w, request);
  w.EndObject();
  return buffer.GetString();
}

std::string EncodeStreamUpdate(const StreamSpec& spec, std::string_view observed_config) {
  std::optional<rapidjson::Document> parsed = model::json::ParseObject(observed_config);
  if (!parsed) return EncodeStreamConfig(spec);
  rapidjson::Document& config = *parsed;
  auto& a = config.GetAllocator();
  Set(config, "name", Text(spec.name.str(), a), a);
  rapidjson::Value subjects(rapidjson::kArrayType);
  for (const std::string& subject : spec.subjects) subjects.PushBack(Text(subject, a), a);
  Set(config, "subjects", std::move(subjects), a);
  Set(config, "retention", Text(model::ToApi(spec.retention), a), a);
  Set(config, "storage", Text(model::ToApi(spec.storage), a), a);
  Set(config, "num_replicas", rapidjson::Value(spec.replicas), a);
  Set(config, "max_age", rapidjson::Value(static_cast<int64_t>(spec.max_age_ns)), a);
  Set(config, "max_msgs", rapidjson::Value(static_cast<int64_t>(spec.max_msgs)), a);
  Set(config, "max_bytes", rapidjson::Value(static_cast<int64_t>(spec.max_bytes)), a);
  Set(config, "discard", Text(model::ToApi(spec.discard), a), a);
  SetOrRemove(config, "description", spec.description, a);
  // The duplicate window is not owned, but it may not exceed max_age: when a new max_age is
  // shorter, 0 lets the server pick min(2 min, max_age) (what a create does).
  const int64_t window = model::json::Int(config, "duplicate_window", 0);
  if (spec.max_age_ns > 0 && window > spec.max_age_ns) {
    Set(config, "duplicate_window", rapidjson::Value(int64_t{0}), a);
  }
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  config.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string EncodeConsumerUpdate(const ConsumerSpec& spec, std::string_view observed_config,
                                 ConsumerRequest request) {
  std::optional<rapidjson::Document> parsed = model::json::ParseObject(observed_config);
  if (!parsed) return EncodeConsumerCreate(spec, request);
  rapidjson::Document& config = *parsed;
  auto& a = config.GetAllocator();
  Set(config, "durable_name", Text(spec.durable.str(), a), a);
  SetOrRemove(config, "deliver_subject", spec.deliver_subject, a);
  SetOrRemove(config, "deliver_group", spec.deliver_group, a);
  SetOrRemove(config, "filter_subject", spec.filter_subject, a);
  // One filter field at a time (2.10 refuses both, 10136): the owned filter_subject wins.
  if (!spec.filter_subject.empty()) config.RemoveMember("filter_subjects");
  Set(config, "ack_policy", Text(model::ToApi(spec.ack), a), a);
  Set(config, "deliver_policy", Text(model::ToApi(spec.deliver), a), a);
  Set(config, "replay_policy", Text(model::ToApi(spec.replay), a), a);
  Set(config, "ack_wait", rapidjson::Value(static_cast<int64_t>(spec.ack_wait_ns)), a);
  Set(config, "max_deliver", rapidjson::Value(static_cast<int64_t>(spec.max_deliver)), a);

  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Field(w, "stream_name", spec.stream.str());
  w.Key("config");
  config.Accept(w);
  WriteAction(w, request);
  w.EndObject();
  return buffer.GetString();
}

}  // namespace mesh::reconciler
