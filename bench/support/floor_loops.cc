#include "bench/support/floor_loops.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "observers/jetstream.h"
#include "reconciler/apply/encode.h"

namespace mesh::testing {

namespace {

using observers::ApiReply;
using observers::ApiRequest;
using observers::BusConnection;

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "bench: %s\n", why.c_str());
  std::exit(1);
}

// Every request must have an answer that is not an API error.
void RequireAnswered(const std::vector<ApiRequest>& requests,
                     const std::vector<ApiReply>& replies) {
  if (replies.size() < requests.size()) Die(requests[replies.size()].subject + ": no reply");
  for (size_t i = 0; i < replies.size(); ++i) {
    if (!replies[i].status.ok()) Die(requests[i].subject + ": " + replies[i].status.ToString());
    if (auto error = observers::ParseApiError(replies[i].payload)) {
      Die(requests[i].subject + ": " + error->description);
    }
  }
}

struct Listed {
  int64_t total = 0;
  int64_t count = 0;
  std::vector<std::string> names;  // stream names, for the stream list
};

Listed ParseList(const std::string& payload, const char* items_key) {
  rapidjson::Document doc;
  doc.Parse(payload.data(), payload.size());
  if (doc.HasParseError() || !doc.IsObject()) Die("a list answer is not JSON");
  Listed out;
  if (doc.HasMember("total") && doc["total"].IsInt64()) out.total = doc["total"].GetInt64();
  if (doc.HasMember(items_key) && doc[items_key].IsArray()) {
    for (const auto& item : doc[items_key].GetArray()) {
      ++out.count;
      if (item.HasMember("config") && item["config"].HasMember("name")) {
        out.names.emplace_back(item["config"]["name"].GetString());
      }
    }
  }
  return out;
}

std::string Offset(int64_t offset) {
  return "{\"offset\":" + std::to_string(offset) + "}";
}

}  // namespace

int64_t BareListLoop(BusConnection& bus, observers::Spread spread) {
  int64_t sent = 0;
  auto send = [&](const std::vector<ApiRequest>& requests,
                  observers::Spread how = observers::Spread::kOneConnection) {
    std::vector<ApiReply> replies = bus.RequestMany(requests, how);
    RequireAnswered(requests, replies);
    sent += static_cast<int64_t>(requests.size());
    return replies;
  };
  const char* stream_list = "$JS.API.STREAM.LIST";
  Listed first = ParseList(send({{stream_list, Offset(0)}})[0].payload, "streams");
  std::vector<std::string> streams = first.names;
  std::vector<ApiRequest> pages;
  for (int64_t at = first.count; at < first.total; at += std::max<int64_t>(first.count, 1)) {
    pages.push_back({stream_list, Offset(at)});
  }
  for (const ApiReply& reply : send(pages)) {
    Listed page = ParseList(reply.payload, "streams");
    streams.insert(streams.end(), page.names.begin(), page.names.end());
  }
  std::vector<ApiRequest> consumer_lists;
  for (const std::string& stream : streams) {
    consumer_lists.push_back({"$JS.API.CONSUMER.LIST." + stream, Offset(0)});
  }
  std::vector<ApiReply> replies = send(consumer_lists, spread);
  std::vector<ApiRequest> more;
  for (size_t i = 0; i < replies.size(); ++i) {
    Listed page = ParseList(replies[i].payload, "consumers");
    for (int64_t at = page.count; at < page.total; at += std::max<int64_t>(page.count, 1)) {
      more.push_back({consumer_lists[i].subject, Offset(at)});
    }
  }
  send(more, spread);
  return sent;
}

Creations CreationsFor(const model::DesiredState& desired) {
  Creations out;
  for (const auto& s : desired.streams) {
    out.streams.push_back(
        {"$JS.API.STREAM.CREATE." + s.name.str(), reconciler::EncodeStreamConfig(s)});
  }
  for (const auto& c : desired.consumers) {
    out.consumers.push_back(
        {"$JS.API.CONSUMER.DURABLE.CREATE." + c.stream.str() + "." + c.durable.str(),
         reconciler::EncodeConsumerCreate(c)});
  }
  return out;
}

void PipelinedCreationLoop(BusConnection& bus, const model::DesiredState& desired,
                           observers::Spread spread) {
  const Creations creations = CreationsFor(desired);
  for (const auto* batch : {&creations.streams, &creations.consumers}) {
    RequireAnswered(*batch, bus.RequestMany(*batch, spread));
  }
}

}  // namespace mesh::testing
