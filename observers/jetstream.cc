#include "observers/jetstream.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <span>
#include <tuple>

#include "model/json_read.h"
#include "observers/jetstream_api.h"

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

using jsapi::kStreamNotFound;

// ---- Reading JSON -----------------------------------------------------------------------------

using model::json::Int;
using model::json::Member;
using model::json::String;

Result<rapidjson::Document> ParseObject(std::string_view json, const std::string& what) {
  std::optional<rapidjson::Document> doc = model::json::ParseObject(json);
  if (!doc) return Status(Errc::kInternal, "malformed JSON from " + what);
  return std::move(*doc);
}

// Decodes an API enum string; `absent` when the server omitted the field. A value this build
// does not know (a newer server's) decodes as `absent` and is named in `problems`.
template <typename E, size_t N>
E Enum(const rapidjson::Value& object, const char* key, E absent, const EnumNames<E, N>& names,
       std::vector<std::string>& problems) {
  const rapidjson::Value* v = Member(object, key);
  if (v == nullptr) return absent;
  const std::string text = v->IsString() ? std::string(v->GetString()) : "";
  if (std::optional<E> value = names.Parse(text)) return *value;
  problems.push_back(std::string("config.") + key + ": unknown value \"" + text + "\"");
  return absent;
}

std::string JoinProblems(const std::vector<std::string>& problems) {
  std::string out;
  for (const std::string& p : problems) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string Compact(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

// A decoded config and what could not be decoded in it (empty when everything was).
template <typename Spec>
struct Decoded {
  Spec spec;
  std::string problem;
};

// Server defaults (nats-server 2.9 setConfigDefaults): what an omitted or zero field means.
// Decodes what it can: an unknown value is a problem of this object, not an error, so that one
// odd object (often a foreign one) never fails the observation of the others.
Result<Decoded<StreamSpec>> DecodeStream(const rapidjson::Value& config) {
  Decoded<StreamSpec> out;
  StreamSpec& spec = out.spec;
  std::vector<std::string> problems;
  spec.name = StreamName(String(config, "name"));
  if (spec.name.empty()) return Status(Errc::kInternal, "stream config without a name");
  if (const rapidjson::Value* subjects = Member(config, "subjects"); subjects != nullptr) {
    if (!subjects->IsArray()) {
      problems.push_back("config.subjects: not an array");
    } else {
      for (const auto& subject : subjects->GetArray()) {
        if (subject.IsString()) spec.subjects.emplace_back(subject.GetString());
      }
    }
  }
  std::sort(spec.subjects.begin(), spec.subjects.end());
  spec.subjects.erase(std::unique(spec.subjects.begin(), spec.subjects.end()), spec.subjects.end());
  spec.retention = Enum(config, "retention", Retention::kLimits, model::kRetentionNames, problems);
  spec.storage = Enum(config, "storage", Storage::kFile, model::kStorageNames, problems);
  spec.discard = Enum(config, "discard", Discard::kOld, model::kDiscardNames, problems);
  spec.replicas = static_cast<int>(std::max<int64_t>(1, Int(config, "num_replicas", 1)));
  spec.max_age_ns = Int(config, "max_age", 0);
  spec.max_msgs = Int(config, "max_msgs", model::kUnlimited);
  spec.max_bytes = Int(config, "max_bytes", model::kUnlimited);
  if (spec.max_msgs == 0) spec.max_msgs = model::kUnlimited;
  if (spec.max_bytes == 0) spec.max_bytes = model::kUnlimited;
  spec.description = String(config, "description");
  out.problem = JoinProblems(problems);
  return out;
}

Decoded<ConsumerSpec> DecodeConsumer(std::string_view stream, const rapidjson::Value& config) {
  Decoded<ConsumerSpec> out;
  ConsumerSpec& spec = out.spec;
  std::vector<std::string> problems;
  spec.stream = StreamName(std::string(stream));
  spec.durable = ConsumerName(String(config, "durable_name"));
  spec.filter_subject = String(config, "filter_subject");
  spec.deliver_subject = String(config, "deliver_subject");
  spec.deliver_group = String(config, "deliver_group");
  // ack_policy "none" is the API's zero value; ack_wait is omitted for it and defaults to 30 s.
  spec.ack = Enum(config, "ack_policy", AckPolicy::kNone, model::kAckPolicyNames, problems);
  spec.deliver =
      Enum(config, "deliver_policy", DeliverPolicy::kAll, model::kDeliverPolicyNames, problems);
  spec.replay =
      Enum(config, "replay_policy", ReplayPolicy::kInstant, model::kReplayPolicyNames, problems);
  spec.ack_wait_ns = Int(config, "ack_wait", model::kAckWaitNanos);
  if (spec.ack_wait_ns == 0) spec.ack_wait_ns = model::kAckWaitNanos;
  spec.max_deliver = Int(config, "max_deliver", model::kUnlimited);
  if (spec.max_deliver == 0) spec.max_deliver = model::kUnlimited;
  out.problem = JoinProblems(problems);
  return out;
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
// time (an election, a slow member), or with the config it assigned to those whose members are
// all offline, and names both in "missing". Such an answer does not say what they hold, nor
// that they are absent: they are undescribed, each a problem of its own (never drift, never a
// failed observation). 2.14 also gives a reason per name in "offline".
constexpr char kUndescribedReason[] =
    "named in the list's \"missing\": no leader described it in time (an election under way, "
    "or every member holding it offline)";
std::map<std::string, std::string> MissingNames(const rapidjson::Document& doc) {
  std::map<std::string, std::string> names;
  const rapidjson::Value* missing = Member(doc, "missing");
  if (missing == nullptr || !missing->IsArray()) return names;
  const rapidjson::Value* offline = Member(doc, "offline");
  for (const rapidjson::Value& name : missing->GetArray()) {
    if (!name.IsString() || name.GetStringLength() == 0) continue;
    std::string reason = kUndescribedReason;
    if (offline != nullptr && offline->IsObject()) {
      const std::string said = String(*offline, name.GetString());
      if (!said.empty()) reason = "offline: " + said;
    }
    names.emplace(name.GetString(), std::move(reason));
  }
  return names;
}

// The desired spec of a stream or consumer, when the scope has a desired state (sorted by
// name, and by (stream, durable): DesiredState); nullptr otherwise.
const StreamSpec* DesiredStream(const ObserveScope& scope, const std::string& name) {
  if (scope.desired == nullptr) return nullptr;
  const auto& streams = scope.desired->streams;
  auto it =
      std::lower_bound(streams.begin(), streams.end(), name,
                       [](const StreamSpec& s, const std::string& n) { return s.name.str() < n; });
  return it != streams.end() && it->name.str() == name ? &*it : nullptr;
}
const ConsumerSpec* DesiredConsumer(const ObserveScope& scope, const ConsumerSpec& found) {
  if (scope.desired == nullptr) return nullptr;
  const auto& consumers = scope.desired->consumers;
  auto key = [](const ConsumerSpec& c) { return std::tie(c.stream, c.durable); };
  auto it = std::lower_bound(
      consumers.begin(), consumers.end(), found,
      [&](const ConsumerSpec& a, const ConsumerSpec& b) { return key(a) < key(b); });
  return it != consumers.end() && key(*it) == key(found) ? &*it : nullptr;
}

// The server's whole config, kept for an update (ObservedStream::raw_config), unless the object
// is exactly as desired: then nothing will update it (ObserveScope::desired).
template <typename Spec>
std::string RawConfigFor(const rapidjson::Value& config, const Spec& found, const Spec* desired) {
  if (desired != nullptr && *desired == found) return std::string();
  return Compact(config);
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

// One stream as a list or an info answer describes it ({"config":..,"cluster":..}) into
// `streams`; an entry that names no stream cannot be anyone's and is skipped. `clustered` is set
// when the server describes the stream's group (a standalone server omits "cluster").
void AddStream(const rapidjson::Value& item, const ObserveScope& scope,
               std::map<std::string, ObservedStream>& streams, bool& clustered, int& cluster_size) {
  const rapidjson::Value* config = item.IsObject() ? Member(item, "config") : nullptr;
  if (config == nullptr || !config->IsObject()) return;
  auto decoded = DecodeStream(*config);
  if (!decoded.ok()) return;
  std::string raw =
      RawConfigFor(*config, decoded->spec, DesiredStream(scope, decoded->spec.name.str()));
  ObservedStream stream{std::move(decoded->spec), std::move(raw), std::move(decoded->problem)};
  stream.max_consumers = Int(*config, "max_consumers", -1);
  if (const rapidjson::Value* state = Member(item, "state");
      state != nullptr && state->IsObject()) {
    stream.consumer_count = Int(*state, "consumer_count", -1);
  }
  if (const rapidjson::Value* cluster = Member(item, "cluster");
      cluster != nullptr && cluster->IsObject()) {
    clustered = true;
    const rapidjson::Value* replicas = Member(*cluster, "replicas");
    const int peers = replicas != nullptr && replicas->IsArray() ? replicas->Size() : 0;
    cluster_size = std::max(cluster_size, 1 + peers);
  }
  streams.insert_or_assign(stream.config.name.str(), std::move(stream));
}

// Lists every stream: the first page, then all the other pages at once.
Status ListStreams(BusConnection& bus, const ObserveScope& scope, ObservedJetStream& out) {
  std::vector<ApiRequest> requests = {{jsapi::StreamList(), OffsetPayload(0)}};
  std::map<std::string, ObservedStream> streams;
  std::map<std::string, std::string> undescribed;
  bool clustered = false;
  for (bool first = true; !requests.empty(); first = false) {
    std::vector<ApiReply> replies = bus.RequestMany(requests);
    out.api_requests += static_cast<int>(requests.size());
    std::vector<ApiRequest> next;
    for (size_t i = 0; i < requests.size(); ++i) {
      auto doc = Answer(requests[i], replies[i]);
      if (!doc.ok()) return doc.status();
      auto page = ReadPage(*doc, "streams", jsapi::StreamList());
      if (!page.ok()) return page.status();
      if (page->items != nullptr) {
        for (const auto& item : page->items->GetArray()) {
          AddStream(item, scope, streams, clustered, out.cluster_size);
        }
      }
      for (auto& [name, reason] : MissingNames(*doc)) {
        streams.erase(name);  // an offline stream's entry is its assignment, not its state
        undescribed.insert_or_assign(name, std::move(reason));
      }
      if (first) {
        for (int64_t offset : RemainingOffsets(*page)) {
          next.push_back({jsapi::StreamList(), OffsetPayload(offset)});
        }
      }
    }
    requests = std::move(next);
  }
  if (!clustered) out.cluster_size = 1;
  for (auto& [name, stream] : streams) out.streams.push_back(std::move(stream));
  for (auto& [name, reason] : undescribed) {
    out.undescribed.push_back({StreamName(name), ConsumerName(), std::move(reason)});
  }
  return Status::Ok();
}

// One STREAM.INFO per name, all at once; a name the server does not know is absent, not an
// error.
Status InfoStreams(BusConnection& bus, const std::set<StreamName>& names, const ObserveScope& scope,
                   ObservedJetStream& out) {
  std::vector<ApiRequest> requests;
  for (const StreamName& name : names) requests.push_back({jsapi::StreamInfo(name.str()), ""});
  std::vector<ApiReply> replies = bus.RequestMany(requests);
  out.api_requests += static_cast<int>(requests.size());
  std::map<std::string, ObservedStream> streams;
  bool clustered = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::optional<ApiError> error;
    auto doc = Answer(requests[i], replies[i], kStreamNotFound, &error);
    if (!doc.ok()) return doc.status();
    if (!error) AddStream(*doc, scope, streams, clustered, out.cluster_size);
  }
  if (!clustered) out.cluster_size = 1;
  for (auto& [name, stream] : streams) out.streams.push_back(std::move(stream));
  return Status::Ok();
}

// Consumer lists sent per RequestMany, whose answers are decoded before the next batch is sent:
// a batch of answers is all that is held at once (at ten times the Large mesh, all 6,203 answers
// together were about 30 MiB). Each batch still keeps max_in_flight outstanding; between
// batches the pipeline drains once, one round trip per batch.
constexpr size_t kListBatch = 256;
// The pages after a stream's first are full ones (256 consumers, about 200 KB each at the
// mesh's configs): fewer of them per batch. At ten times the Large mesh, DECL's 78 later pages
// in one batch were 16 MiB of answers held at once.
constexpr size_t kLaterPageBatch = 16;

// A consumer list page still to ask for.
struct PendingList {
  std::string stream;
  int64_t offset;
};
using UndescribedConsumers = std::map<std::pair<std::string, std::string>, std::string>;

// One batch of consumer list pages: sends them, decodes every answer into `out` (a stream gone
// meanwhile into `vanished`, a consumer named in "missing" into `undescribed`), and appends the
// later pages of each first page to `next`.
Status ListConsumerBatch(BusConnection& bus, const ObserveScope& scope,
                         std::span<const PendingList> pending, Spread spread,
                         ObservedJetStream& out, std::set<std::string>& vanished,
                         UndescribedConsumers& undescribed, std::vector<PendingList>& next) {
  std::vector<ApiRequest> requests;
  requests.reserve(pending.size());
  for (const PendingList& p : pending) {
    requests.push_back({jsapi::ConsumerList(p.stream), OffsetPayload(p.offset)});
  }
  std::vector<ApiReply> replies = bus.RequestMany(requests, spread);
  out.api_requests += static_cast<int>(requests.size());
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
    const std::map<std::string, std::string> missing = MissingNames(*doc);
    for (const auto& [name, reason] : missing) {
      undescribed.insert_or_assign({stream, name}, reason);
    }
    if (page->items != nullptr) {
      for (const auto& item : page->items->GetArray()) {
        const rapidjson::Value* config = item.IsObject() ? Member(item, "config") : nullptr;
        if (config == nullptr || !config->IsObject()) continue;  // names no consumer: skipped
        Decoded<ConsumerSpec> decoded = DecodeConsumer(stream, *config);
        // An offline consumer's entry is its assignment, not its state.
        if (missing.count(decoded.spec.durable.str()) != 0) continue;
        std::string raw = RawConfigFor(*config, decoded.spec, DesiredConsumer(scope, decoded.spec));
        out.consumers.push_back(
            {std::move(decoded.spec), std::move(raw), std::move(decoded.problem)});
      }
    }
    if (pending[i].offset == 0) {
      for (int64_t offset : RemainingOffsets(*page)) next.push_back({stream, offset});
    }
  }
  return Status::Ok();
}

// First pages to list before the lanes are worth opening for them. Each lane costs the server
// one bcrypt of our password (at cost 10 about 65 ms of its CPU), spent while it answers the
// first batch: on the Large mesh (623 lists, three batches) the three lanes' logins cost more
// than the two batches they carried saved, and `plan` and a restarted daemon's first pass took
// 0.25-0.30 s instead of 0.18-0.21 s (restart_bench, with a users file at cost 10). At three
// and ten times that mesh the lanes pay for themselves.
constexpr size_t kLanesFromLists = 4 * kListBatch;

// Lists the consumers of the streams in scope, settings.max_in_flight lists at a time, in
// batches of kListBatch; over the lanes when there are more than kLanesFromLists first pages, or
// more than one batch of later pages (Spread::kLanes: up to 2.11.9 the server answers one
// connection's requests one after another).
Status ListConsumers(BusConnection& bus, const ObserveScope& scope, ObservedJetStream& out) {
  std::vector<PendingList> pending;
  int64_t expected = 0;  // consumers the streams to list count
  for (const ObservedStream& stream : out.streams) {
    if (!scope.Covers(stream)) continue;
    if (scope.known_consumers != nullptr) {
      auto known = scope.known_consumers->find(stream.config.name);
      if (known != scope.known_consumers->end() &&
          stream.consumer_count == static_cast<int64_t>(known->second.size())) {
        out.consumers.insert(out.consumers.end(), known->second.begin(), known->second.end());
        continue;
      }
    }
    pending.push_back({stream.config.name.str(), 0});
    expected += std::max<int64_t>(0, stream.consumer_count);
  }
  // As many as the stream list counts (ephemerals included): one allocation rather than a
  // doubling vector, which at its last growth held both copies (25 MiB at ten times the Large
  // mesh).
  out.consumers.reserve(out.consumers.size() + static_cast<size_t>(expected));
  std::set<std::string> vanished;  // deleted between the two lists
  UndescribedConsumers undescribed;
  for (size_t batch = kListBatch; !pending.empty(); batch = kLaterPageBatch) {
    std::vector<PendingList> next;
    const size_t lanes_from = batch == kListBatch ? kLanesFromLists : batch;
    const Spread spread = pending.size() > lanes_from ? Spread::kLanes : Spread::kOneConnection;
    for (size_t begin = 0; begin < pending.size(); begin += batch) {
      const size_t end = std::min(pending.size(), begin + batch);
      if (Status s = ListConsumerBatch(bus, scope, std::span(pending).subspan(begin, end - begin),
                                       spread, out, vanished, undescribed, next);
          !s.ok()) {
        return s;
      }
    }
    pending = std::move(next);
  }
  std::erase_if(out.streams,
                [&](const ObservedStream& s) { return vanished.count(s.config.name.str()) > 0; });
  for (auto& [key, reason] : undescribed) {
    if (vanished.count(key.first) != 0) continue;
    out.undescribed.push_back({StreamName(key.first), ConsumerName(key.second), std::move(reason)});
  }
  std::sort(out.undescribed.begin(), out.undescribed.end(),
            [](const UndescribedObject& a, const UndescribedObject& b) {
              return std::tie(a.stream, a.consumer) < std::tie(b.stream, b.consumer);
            });
  // Listed stream by stream in name order, each list sorted by the server: usually in order
  // already, which a check sees in one walk.
  auto by_name = [](const ObservedConsumer& a, const ObservedConsumer& b) {
    return std::tie(a.config.stream, a.config.durable) <
           std::tie(b.config.stream, b.config.durable);
  };
  if (!std::is_sorted(out.consumers.begin(), out.consumers.end(), by_name)) {
    std::sort(out.consumers.begin(), out.consumers.end(), by_name);
  }
  return Status::Ok();
}

}  // namespace

std::optional<ApiError> ParseApiError(std::string_view payload) {
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  return ApiErrorOf(doc);
}

bool ObserveScope::Covers(const ObservedStream& stream) const {
  return !ownership_mark || stream.config.description == *ownership_mark;
}

Result<ObservedJetStream> ObserveJetStream(BusConnection& bus, const ObserveScope& scope) {
  ObservedJetStream out;
  if (Status s = ListStreams(bus, scope, out); !s.ok()) return s;
  if (Status s = ListConsumers(bus, scope, out); !s.ok()) return s;
  return out;
}

Result<ObservedJetStream> ObserveStreams(BusConnection& bus, const std::set<StreamName>& names,
                                         const ObserveScope& scope) {
  ObservedJetStream out;
  if (names.empty()) return out;
  if (Status s = InfoStreams(bus, names, scope, out); !s.ok()) return s;
  if (Status s = ListConsumers(bus, scope, out); !s.ok()) return s;
  return out;
}

Result<StreamSpec> DecodeStreamConfig(std::string_view config_json) {
  auto doc = ParseObject(config_json, "stream config");
  if (!doc.ok()) return doc.status();
  auto decoded = DecodeStream(*doc);
  if (!decoded.ok()) return decoded.status();
  if (!decoded->problem.empty()) return Status(Errc::kInternal, decoded->problem);
  return std::move(decoded->spec);
}

Result<ConsumerSpec> DecodeConsumerConfig(std::string_view stream, std::string_view config_json) {
  auto doc = ParseObject(config_json, "consumer config");
  if (!doc.ok()) return doc.status();
  Decoded<ConsumerSpec> decoded = DecodeConsumer(stream, *doc);
  if (!decoded.problem.empty()) return Status(Errc::kInternal, decoded.problem);
  return std::move(decoded.spec);
}

Result<ObservedStream> DecodeObservedStream(std::string_view config_json) {
  auto doc = ParseObject(config_json, "stream config");
  if (!doc.ok()) return doc.status();
  auto decoded = DecodeStream(*doc);
  if (!decoded.ok()) return decoded.status();
  return ObservedStream{std::move(decoded->spec), Compact(*doc), std::move(decoded->problem)};
}

Result<ObservedConsumer> DecodeObservedConsumer(std::string_view stream,
                                                std::string_view config_json) {
  auto doc = ParseObject(config_json, "consumer config");
  if (!doc.ok()) return doc.status();
  Decoded<ConsumerSpec> decoded = DecodeConsumer(stream, *doc);
  return ObservedConsumer{std::move(decoded.spec), Compact(*doc), std::move(decoded.problem)};
}

}  // namespace mesh::observers
