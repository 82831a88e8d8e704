// Reading JSON objects, by one of two rules:
// - leniently (the free functions): a member that is absent, null or of another type reads as
//   absent. Every answer of the server (JetStream API answers, the monitoring endpoint) is read
//   this way, by the observers and the CLI;
// - strictly (StrictReader): the first missing or mistyped field is the error, with its path.
//   What the reconciler itself wrote and reads back (a pass report: reconciler/pass/report.cc).
// model/spec_json.h is the writing side. The records file is validated on its own
// (model/records.cc): there every error is collected, and unknown keys are errors too.
//
// Pure; thread-safety: free functions over caller-owned values.
#pragma once

#include <rapidjson/document.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/enum_names.h"

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

// Reads typed fields out of a parsed document, keeping the first error with its path.
class StrictReader {
 public:
  const rapidjson::Value* Member(const rapidjson::Value& object, const char* key,
                                 const std::string& path) {
    if (!object.IsObject()) return Fail(path + ": not an object");
    auto it = object.FindMember(key);
    if (it == object.MemberEnd()) return Fail(path + "." + key + ": missing");
    return &it->value;
  }

  std::string Str(const rapidjson::Value& object, const char* key, const std::string& path) {
    const rapidjson::Value* v = Member(object, key, path);
    if (v == nullptr) return "";
    if (!v->IsString()) {
      Fail(path + "." + key + ": not a string");
      return "";
    }
    return std::string(v->GetString(), v->GetStringLength());
  }

  // A string field that may be absent.
  std::string OptionalStr(const rapidjson::Value& object, const char* key,
                          const std::string& path) {
    if (!object.IsObject() || !object.HasMember(key)) return "";
    return Str(object, key, path);
  }

  int64_t Int(const rapidjson::Value& object, const char* key, const std::string& path) {
    const rapidjson::Value* v = Member(object, key, path);
    if (v == nullptr) return 0;
    if (!v->IsInt64()) {
      Fail(path + "." + key + ": not an integer");
      return 0;
    }
    return v->GetInt64();
  }

  double Double(const rapidjson::Value& object, const char* key, const std::string& path) {
    const rapidjson::Value* v = Member(object, key, path);
    if (v == nullptr) return 0;
    if (!v->IsNumber()) {
      Fail(path + "." + key + ": not a number");
      return 0;
    }
    return v->GetDouble();
  }

  bool Bool(const rapidjson::Value& object, const char* key, const std::string& path) {
    const rapidjson::Value* v = Member(object, key, path);
    if (v == nullptr) return false;
    if (!v->IsBool()) {
      Fail(path + "." + key + ": not a boolean");
      return false;
    }
    return v->GetBool();
  }

  // Calls fn(element, element_path) for each element of an array field.
  template <typename Fn>
  void Each(const rapidjson::Value& object, const char* key, const std::string& path, Fn fn) {
    const rapidjson::Value* v = Member(object, key, path);
    if (v == nullptr) return;
    const std::string base = path + "." + key;
    if (!v->IsArray()) {
      Fail(base + ": not an array");
      return;
    }
    for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
      fn((*v)[i], base + "[" + std::to_string(i) + "]");
    }
  }

  std::vector<std::string> Strings(const rapidjson::Value& object, const char* key,
                                   const std::string& path) {
    std::vector<std::string> out;
    Each(object, key, path, [&](const rapidjson::Value& v, const std::string& at) {
      if (!v.IsString()) {
        Fail(at + ": not a string");
        return;
      }
      out.emplace_back(v.GetString(), v.GetStringLength());
    });
    return out;
  }

  template <typename E, std::size_t N>
  E Enum(const rapidjson::Value& object, const char* key, const std::string& path,
         const EnumNames<E, N>& names) {
    const std::string text = Str(object, key, path);
    if (!ok()) return E{};
    std::optional<E> value = names.Parse(text);
    if (!value) {
      Fail(path + "." + key + ": unknown value \"" + text + "\"");
      return E{};
    }
    return *value;
  }

  std::nullptr_t Fail(const std::string& message) {
    if (error_.empty()) error_ = message;
    return nullptr;
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

}  // namespace mesh::model::json
