#include "model/spec_json.h"

namespace mesh::model::json {

void String(Writer& w, const std::string& value) {
  w.String(value.data(), static_cast<rapidjson::SizeType>(value.size()));
}
void Field(Writer& w, const char* key, const std::string& value) {
  w.Key(key);
  String(w, value);
}
void Field(Writer& w, const char* key, const char* value) {
  w.Key(key);
  w.String(value);
}
void Field(Writer& w, const char* key, int64_t value) {
  w.Key(key);
  w.Int64(value);
}
void Field(Writer& w, const char* key, const std::vector<std::string>& values) {
  w.Key(key);
  w.StartArray();
  for (const std::string& v : values) String(w, v);
  w.EndArray();
}
void BoolField(Writer& w, const char* key, bool value) {
  w.Key(key);
  w.Bool(value);
}

void WriteStreamSpec(Writer& w, const StreamSpec& s) {
  w.StartObject();
  Field(w, "name", s.name.str());
  Field(w, "subjects", s.subjects);
  Field(w, "retention", ToApi(s.retention));
  Field(w, "storage", ToApi(s.storage));
  Field(w, "replicas", static_cast<int64_t>(s.replicas));
  Field(w, "max_age_ns", s.max_age_ns);
  Field(w, "max_msgs", s.max_msgs);
  Field(w, "max_bytes", s.max_bytes);
  Field(w, "discard", ToApi(s.discard));
  Field(w, "description", s.description);
  w.EndObject();
}

void WriteConsumerSpecFields(Writer& w, const ConsumerSpec& c) {
  Field(w, "stream", c.stream.str());
  Field(w, "durable", c.durable.str());
  Field(w, "filter_subject", c.filter_subject);
  Field(w, "deliver_subject", c.deliver_subject);
  Field(w, "deliver_group", c.deliver_group);
  Field(w, "ack_policy", ToApi(c.ack));
  Field(w, "deliver_policy", ToApi(c.deliver));
  Field(w, "replay_policy", ToApi(c.replay));
  Field(w, "ack_wait_ns", c.ack_wait_ns);
  Field(w, "max_deliver", c.max_deliver);
}

}  // namespace mesh::model::json
