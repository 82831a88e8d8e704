// Reading JSON objects leniently: a member that is absent, null or of another type reads as
// absent. Shared by the observers (JetStream API answers, the monitoring endpoint), so that
// every answer of the server is read by one set of rules; model/spec_json.h is the writing side.
// The records file has its own strict reader (model/records.cc): there a wrong type is an error
// that names the field, not an absent value.
//
// Pure; thread-safety: free functions over caller-owned values.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::model::json {

// The text parsed, when it is one JSON object; nullopt otherwise.
inline std::optional<rapidjson::Document> ParseObject(std::string_view text) {
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  return doc;
}

// The member `key` of `object`, or nullptr when absent or null.
inline const rapidjson::Value* Member(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

// A string member, or "" when absent or not a string.
inline std::string String(const rapidjson::Value& object, const char* key) {
  const rapidjson::Value* v = Member(object, key);
  if (v == nullptr || !v->IsString()) return "";
  return std::string(v->GetString(), v->GetStringLength());
}

// An integer member, or `absent` when absent or not an integer.
inline int64_t Int(const rapidjson::Value& object, const char* key, int64_t absent) {
  const rapidjson::Value* v = Member(object, key);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : absent;
}

// A boolean member, or `absent` when absent or not a boolean.
inline bool Bool(const rapidjson::Value& object, const char* key, bool absent) {
  const rapidjson::Value* v = Member(object, key);
  return v != nullptr && v->IsBool() ? v->GetBool() : absent;
}

}  // namespace mesh::model::json
