#include "observers/api_audit.h"

#include "model/json_read.h"
#include "observers/jetstream_api.h"

namespace mesh::observers {

std::optional<std::string> StreamDeletionAnswered(std::string_view audit) {
  // The key as the server writes it (Go's encoding/json, no spaces): inside the request and
  // response strings every quote is escaped, so this text can only be the top-level key.
  static const std::string kDeletionSubject = "\"subject\":\"" + jsapi::StreamDelete("");
  if (audit.find(kDeletionSubject) == std::string_view::npos) return std::nullopt;
  std::optional<rapidjson::Document> doc = model::json::ParseObject(audit);
  if (!doc) return std::nullopt;
  const std::string subject = model::json::String(*doc, "subject");
  const std::string prefix = jsapi::StreamDelete("");
  if (subject.size() <= prefix.size() || subject.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  std::string stream = subject.substr(prefix.size());
  if (stream.find_first_of(".*> ") != std::string::npos) return std::nullopt;
  std::optional<rapidjson::Document> response =
      model::json::ParseObject(model::json::String(*doc, "response"));
  if (!response || !model::json::Bool(*response, "success", false)) return std::nullopt;
  return stream;
}

}  // namespace mesh::observers
