#include "observers/jetstream.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>

namespace mesh::observers {
namespace {

using model::AckPolicy;
using model::ConsumerSpec;
using model::DeliverPolicy;
using model::Discard;
using model::ReplayPolicy;
using model::Retention;
using model::Storage;
using model::StreamSpec;

constexpr const char* kStreamList = "$JS.API.STREAM.LIST";
constexpr const char* kConsumerListPrefix = "$JS.API.CONSUMER.LIST.";
constexpr int kStreamNotFound = 10059;  // JSStreamNotFoundErr

// ---- Reading JSON -----------------------------------------------------------------------------

Result<rapidjson::Document> ParseObject(std::string_view json, const std::string& what) {
  rapidjson::Document doc;
  doc.Parse(json.data(), json.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Status(Errc::kInternal, "malformed JSON from " + what);
  }
  return doc;
}

const rapidjson::Value* Member(const rapidjson::Value& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() || it->value.IsNull() ? nullptr : &it->value;
}

std::string String(const rapidjson::Value& object, const char* key) {
  const rapidjson::Value* v = Member(object, key);
  if (v == nullptr || !v->IsString()) return "";
  return std::string(v->GetString(), v->GetStringLength());
}

// An integer field, or `absent` when the server omitted it.
int64_t Int(const rapidjson::Value& object, const char* key, int64_t absent) {
  const rapidjson::Value* v = Member(object, key);
  return v != nullptr && v->IsInt64() ? v->GetInt64() : absent;
}

// Decodes an API enum string; `absent` when the server omitted the field.
template <typename E, size_t N>
Result<E> Enum(const rapidjson::Value& object, const char* key, E absent,
               const std::array<E, N>& values) {
  const rapidjson::Value* v = Member(object, key);
  if (v == nullptr) return absent;
  const std::string text = v->IsString() ? std::string(v->GetString()) : "";
  for (E value : values) {
    if (text == model::ToApi(value)) return value;
  }
  return Status(Errc::kInternal, std::string("config.") + key + ": unknown value \"" + text + "\"");
}

constexpr std::array kRetentions = {Retention::kLimits, Retention::kInterest,
                                    Retention::kWorkQueue};
constexpr std::array kStorages = {Storage::kFile, Storage::kMemory};
constexpr std::array kDiscards = {Discard::kOld, Discard::kNew};
constexpr std::array kAckPolicies = {AckPolicy::kNone, AckPolicy::kAll, AckPolicy::kExplicit};
constexpr std::array kDeliverPolicies = {
    DeliverPolicy::kAll,         DeliverPolicy::kLast,
    DeliverPolicy::kNew,         DeliverPolicy::kByStartSequence,
    DeliverPolicy::kByStartTime, DeliverPolicy::kLastPerSubject};
constexpr std::array kReplayPolicies = {ReplayPolicy::kInstant, ReplayPolicy::kOriginal};

// Server defaults (nats-server 2.9 setConfigDefaults): what an omitted or zero field means.
Result<StreamSpec> DecodeStream(const rapidjson::Value& config) {
  StreamSpec spec;
  spec.name = StreamName(String(config, "name"));
  if (spec.name.empty()) return Status(Errc::kInternal, "stream config without a name");
  if (const rapidjson::Value* subjects = Member(config, "subjects"); subjects != nullptr) {
    if (!subjects->IsArray()) return Status(Errc::kInternal, "config.subjects: not an array");
    for (const auto& subject : subjects->GetArray()) {
      if (subject.IsString()) spec.subjects.emplace_back(subject.GetString());
    }
  }
  std::sort(spec.subjects.begin(), spec.subjects.end());
  spec.subjects.erase(std::unique(spec.subjects.begin(), spec.subjects.end()), spec.subjects.end());
  auto retention = Enum(config, "retention", Retention::kLimits, kRetentions);
  auto storage = Enum(config, "storage", Storage::kFile, kStorages);
  auto discard = Enum(config, "discard", Discard::kOld, kDiscards);
  if (!retention.ok()) return retention.status();
  if (!storage.ok()) return storage.status();
  if (!discard.ok()) return discard.status();
  spec.retention = *retention;
  spec.storage = *storage;
  spec.discard = *discard;
  spec.replicas = static_cast<int>(std::max<int64_t>(1, Int(config, "num_replicas", 1)));
  spec.max_age_ns = Int(config, "max_age", 0);
  spec.max_msgs = Int(config, "max_msgs", model::kUnlimited);
  spec.max_bytes = Int(config, "max_bytes", model::kUnlimited);
  if (spec.max_msgs == 0) spec.max_msgs = model::kUnlimited;
  if (spec.max_bytes == 0) spec.max_bytes = model::kUnlimited;
  spec.description = String(config, "description");
  return spec;
}

Result<ConsumerSpec> DecodeConsumer(std::string_view stream, const rapidjson::Value& config) {
  ConsumerSpec spec;
  spec.stream = StreamName(std::string(stream));
  spec.durable = ConsumerName(String(config, "durable_name"));
  spec.filter_subject = String(config, "filter_subject");
  spec.deliver_subject = String(config, "deliver_subject");
  spec.deliver_group = String(config, "deliver_group");
  // ack_policy "none" is the API's zero value; ack_wait is omitted for it and defaults to 30 s.
  auto ack = Enum(config, "ack_policy", AckPolicy::kNone, kAckPolicies);
  auto deliver = Enum(config, "deliver_policy", DeliverPolicy::kAll, kDeliverPolicies);
  auto replay = Enum(config, "replay_policy", ReplayPolicy::kInstant, kReplayPolicies);
  if (!ack.ok()) return ack.status();
  if (!deliver.ok()) return deliver.status();
  if (!replay.ok()) return replay.status();
  spec.ack = *ack;
  spec.deliver = *deliver;
  spec.replay = *replay;
  spec.ack_wait_ns = Int(config, "ack_wait", model::kAckWaitNanos);
  if (spec.ack_wait_ns == 0) spec.ack_wait_ns = model::kAckWaitNanos;
  spec.max_deliver = Int(config, "max_deliver", model::kUnlimited);
  if (spec.max_deliver == 0) spec.max_deliver = model::kUnlimited;
  return spec;
}

// ---- Talking to the API -----------------------------------------------------------------------

std::optional<ApiError> ApiErrorOf(const rapidjson::Value& answer) {
  const rapidjson::Value* error = Member(answer, "error");
  if (error == nullptr || !error->IsObject()) return std::nullopt;
  ApiError parsed;
  parsed.code = static_cast<int>(Int(*error, "code", 0));
  parsed.err_code = static_cast<int>(Int(*error, "err_code", 0));
  parsed.description = String(*error, "description");
  return parsed;
}

// The answer to one API request as a JSON object. Transport failures are errors; an API error
// is an error too, unless it is `tolerated` (then the caller looks at it in `api_error`).
Result<rapidjson::Document> Answer(const ApiRequest& request, const ApiReply& reply,
                                   int tolerated = 0,
                                   std::optional<ApiError>* api_error = nullptr) {
  if (!reply.status.ok()) return reply.status;
  auto doc = ParseObject(reply.payload, request.subject);
  if (!doc.ok()) return doc.status();
  std::optional<ApiError> error = ApiErrorOf(*doc);
  if (error && (tolerated == 0 || error->err_code != tolerated)) {
    return Status(Errc::kRefused, request.subject + ": " + error->description + " (err_code " +
                                      std::to_string(error->err_code) + ")");
  }
  if (api_error != nullptr) *api_error = std::move(error);
  return doc;
}

std::string OffsetPayload(int64_t offset) {
  return "{\"offset\":" + std::to_string(offset) + "}";
}

// A page of a list answer: the items array and where the list stands.
struct Page {
  const rapidjson::Value* items = nullptr;
  int64_t total = 0;
  int64_t offset = 0;
  int64_t limit = 0;
};
Result<Page> ReadPage(const rapidjson::Document& doc, const char* items_key,
                      const std::string& what) {
  Page page;
  page.items = Member(doc, items_key);
  if (page.items != nullptr && !page.items->IsArray()) {
    return Status(Errc::kInternal, what + ": \"" + items_key + "\" is not an array");
  }
  page.total = Int(doc, "total", 0);
  page.offset = Int(doc, "offset", 0);
  page.limit = Int(doc, "limit", 0);
  return page;
}

// A clustered server answers a list without the objects whose leader did not describe them in
// time (a leader moving, a member down) and names them in "missing": such an answer does not
// say they are absent, so it is an error (the pass cannot observe), never drift.
Status CheckComplete(const rapidjson::Document& doc, const std::string& what) {
  const rapidjson::Value* missing = Member(doc, "missing");
  if (missing == nullptr || !missing->IsArray() || missing->Empty()) return Status::Ok();
  const rapidjson::Value& first = (*missing)[0];
  return Status(Errc::kUnavailable, what + ": " + std::to_string(missing->Size()) +
                                        " not described by their leaders in time (first: " +
                                        (first.IsString() ? first.GetString() : "?") +
                                        "); no leader yet?");
}

// Offsets of the pages after the first one, from the first page's total and limit.
std::vector<int64_t> RemainingOffsets(const Page& first) {
  std::vector<int64_t> offsets;
  const int64_t received = first.items == nullptr ? 0 : first.items->Size();
  const int64_t step = first.limit > 0 ? first.limit : received;
  if (step <= 0) return offsets;
  for (int64_t offset = first.offset + received; offset < first.total; offset += step) {
    offsets.push_back(offset);
  }
  return offsets;
}

// Lists every stream: the first page, then all the other pages at once.
Status ListStreams(BusConnection& bus, ObservedJetStream& out) {
  std::vector<ApiRequest> requests = {{kStreamList, OffsetPayload(0)}};
  std::map<std::string, ObservedStream> streams;
  bool clustered = false;
  for (bool first = true; !requests.empty(); first = false) {
    std::vector<ApiReply> replies = bus.RequestMany(requests);
    out.api_requests += static_cast<int>(requests.size());
    std::vector<ApiRequest> next;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto doc = Answer(requests[i], replies[i]);
      if (!doc.ok()) return doc.status();
      auto page = ReadPage(*doc, "streams", kStreamList);
      if (!page.ok()) return page.status();
      if (Status s = CheckComplete(*doc, kStreamList); !s.ok()) return s;
      if (page->items == nullptr) continue;
      for (const auto& item : page->items->GetArray()) {
        const rapidjson::Value* config = item.IsObject() ? Member(item, "config") : nullptr;
        if (config == nullptr || !config->IsObject()) {
          return Status(Errc::kInternal, std::string(kStreamList) + ": entry without config");
        }
        auto spec = DecodeStream(*config);
        if (!spec.ok()) {
          return Status(spec.status().code(),
                        std::string(kStreamList) + ": " + spec.status().message());
        }
        ObservedStream stream{std::move(*spec), ""};
        // Clustered servers describe each stream's group; a standalone server omits "cluster".
        if (const rapidjson::Value* cluster = Member(item, "cluster");
            cluster != nullptr && cluster->IsObject()) {
          clustered = true;
          stream.leader = String(*cluster, "leader");
          const rapidjson::Value* replicas = Member(*cluster, "replicas");
          const int peers = replicas != nullptr && replicas->IsArray() ? replicas->Size() : 0;
          out.cluster_size = std::max(out.cluster_size, 1 + peers);
        }
        streams.insert_or_assign(stream.config.name.str(), std::move(stream));
      }
      if (first) {
        for (int64_t offset : RemainingOffsets(*page)) {
          next.push_back({kStreamList, OffsetPayload(offset)});
        }
      }
    }
    requests = std::move(next);
  }
  if (!clustered) out.cluster_size = 1;
  for (auto& [name, stream] : streams) out.streams.push_back(std::move(stream));
  return Status::Ok();
}

// Lists the consumers of every stream, settings.max_in_flight lists at a time.
Status ListConsumers(BusConnection& bus, ObservedJetStream& out) {
  struct Pending {
    std::string stream;
    int64_t offset;
  };
  std::vector<Pending> pending;
  for (const ObservedStream& stream : out.streams) pending.push_back({stream.config.name.str(), 0});
  std::set<std::string> vanished;  // deleted between the two lists
  while (!pending.empty()) {
    std::vector<ApiRequest> requests;
    for (const Pending& p : pending) {
      requests.push_back({kConsumerListPrefix + p.stream, OffsetPayload(p.offset)});
    }
    std::vector<ApiReply> replies = bus.RequestMany(requests);
    out.api_requests += static_cast<int>(requests.size());
    std::vector<Pending> next;
    for (size_t i = 0; i < requests.size(); ++i) {
      const std::string& stream = pending[i].stream;
      std::optional<ApiError> error;
      auto doc = Answer(requests[i], replies[i], kStreamNotFound, &error);
      if (!doc.ok()) return doc.status();
      if (error) {  // deleted since the stream list: it is gone, consumers and all
        vanished.insert(stream);
        continue;
      }
      auto page = ReadPage(*doc, "consumers", requests[i].subject);
      if (!page.ok()) return page.status();
      if (Status s = CheckComplete(*doc, requests[i].subject); !s.ok()) return s;
      if (page->items == nullptr) continue;
      for (const auto& item : page->items->GetArray()) {
        const rapidjson::Value* config = item.IsObject() ? Member(item, "config") : nullptr;
        if (config == nullptr || !config->IsObject()) {
          return Status(Errc::kInternal, requests[i].subject + ": entry without config");
        }
        auto spec = DecodeConsumer(stream, *config);
        if (!spec.ok()) {
          return Status(spec.status().code(), requests[i].subject + ": " + spec.status().message());
        }
        out.consumers.push_back({std::move(*spec)});
      }
      if (pending[i].offset == 0) {
        for (int64_t offset : RemainingOffsets(*page)) next.push_back({stream, offset});
      }
    }
    pending = std::move(next);
  }
  std::erase_if(out.streams,
                [&](const ObservedStream& s) { return vanished.count(s.config.name.str()) > 0; });
  std::sort(out.consumers.begin(), out.consumers.end(),
            [](const ObservedConsumer& a, const ObservedConsumer& b) {
              return std::tie(a.config.stream, a.config.durable) <
                     std::tie(b.config.stream, b.config.durable);
            });
  return Status::Ok();
}

// ---- Writing JSON -----------------------------------------------------------------------------

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

}  // namespace

std::optional<ApiError> ParseApiError(std::string_view payload) {
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  return ApiErrorOf(doc);
}

Result<ObservedJetStream> ObserveJetStream(BusConnection& bus) {
  ObservedJetStream out;
  if (Status s = ListStreams(bus, out); !s.ok()) return s;
  if (Status s = ListConsumers(bus, out); !s.ok()) return s;
  return out;
}

Result<StreamSpec> DecodeStreamConfig(std::string_view config_json) {
  auto doc = ParseObject(config_json, "stream config");
  if (!doc.ok()) return doc.status();
  return DecodeStream(*doc);
}

Result<ConsumerSpec> DecodeConsumerConfig(std::string_view stream, std::string_view config_json) {
  auto doc = ParseObject(config_json, "consumer config");
  if (!doc.ok()) return doc.status();
  return DecodeConsumer(stream, *doc);
}

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

std::string EncodeConsumerCreate(const ConsumerSpec& spec) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  Field(w, "stream_name", spec.stream.str());
  w.Key("config");
  WriteConsumerConfig(w, spec);
  w.EndObject();
  return buffer.GetString();
}

}  // namespace mesh::observers
