#include "reconciler/plan/bus_hold.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "model/json_read.h"
#include "reconciler/plan/lease.h"

namespace mesh::reconciler {
namespace {

void StringField(rapidjson::Writer<rapidjson::StringBuffer>& w, const char* key,
                 const std::string& value) {
  w.Key(key);
  w.String(value.c_str(), static_cast<rapidjson::SizeType>(value.size()));
}

}  // namespace

std::string BusHoldSubject() {
  return std::string("$KV.") + kLeaseBucket + "." + kBusHoldKey;
}

std::string EncodeBusHold(const BusHold& hold) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("schema");
  w.String(kBusHoldSchema);
  w.Key("until_unix_ms");
  w.Int64(hold.until_unix_ms);
  StringField(w, "reason", hold.reason);
  StringField(w, "by", hold.by);
  StringField(w, "through", hold.through);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

Result<BusHold> ParseBusHold(std::string_view text) {
  std::optional<rapidjson::Document> doc = model::json::ParseObject(text);
  if (!doc || model::json::String(*doc, "schema") != kBusHoldSchema) {
    return Status(Errc::kInvalidArgument,
                  std::string("the bus hold record is not a ") + kBusHoldSchema + " object");
  }
  BusHold hold;
  hold.until_unix_ms = model::json::Int(*doc, "until_unix_ms", 0);
  if (hold.until_unix_ms <= 0) {
    return Status(Errc::kInvalidArgument, "the bus hold record has no until_unix_ms");
  }
  hold.reason = model::json::String(*doc, "reason");
  hold.by = model::json::String(*doc, "by");
  hold.through = model::json::String(*doc, "through");
  return hold;
}

bool InForce(const BusHold& hold, int64_t now_unix_ms) {
  return now_unix_ms < hold.until_unix_ms;
}

bool NeedsRefresh(std::chrono::milliseconds age, std::chrono::milliseconds ttl) {
  return age >= ttl / 3;
}

}  // namespace mesh::reconciler
