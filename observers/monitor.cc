#include "observers/monitor.h"

#include <date/date.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "model/json_read.h"
#include "observers/http_client.h"
#include "observers/server_version.h"

namespace mesh::observers {
namespace {

using model::json::Member;
using model::json::ParseObject;
using model::json::String;

// Reads exactly `digits` decimal digits at `pos`; nullopt otherwise.
std::optional<int64_t> Digits(const std::string& text, size_t pos, size_t digits) {
  if (pos + digits > text.size()) return std::nullopt;
  int64_t value = 0;
  for (size_t i = pos; i < pos + digits; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
    value = value * 10 + (text[i] - '0');
  }
  return value;
}

// "JetStream stream 'A > S' ..." / "JetStream consumer 'A > S > C' ...": the one error 2.9's
// /healthz names (it has no details=true); nullopt for an error about no single object.
// The monitor's URL as given, without trailing slashes, ready for a path.
std::string WithoutTrailingSlashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

std::optional<ObjectHealth> ObjectFromError(const std::string& error) {
  for (const auto& [prefix, kind] :
       {std::pair{"JetStream stream '", ObjectHealth::Kind::kStream},
        std::pair{"JetStream consumer '", ObjectHealth::Kind::kConsumer}}) {
    const std::string p = prefix;
    if (error.compare(0, p.size(), p) != 0) continue;
    const size_t close = error.find('\'', p.size());
    if (close == std::string::npos) return std::nullopt;
    std::vector<std::string> parts;
    const std::string path = error.substr(p.size(), close - p.size());
    for (size_t pos = 0;;) {
      const size_t sep = path.find(" > ", pos);
      parts.push_back(path.substr(pos, sep == std::string::npos ? std::string::npos : sep - pos));
      if (sep == std::string::npos) break;
      pos = sep + 3;
    }
    const size_t want = kind == ObjectHealth::Kind::kStream ? 2 : 3;
    if (parts.size() != want) return std::nullopt;
    ObjectHealth health;
    health.kind = kind;
    health.account = parts[0];
    health.stream = parts[1];
    if (kind == ObjectHealth::Kind::kConsumer) health.consumer = parts[2];
    health.error = error;
    return health;
  }
  return std::nullopt;
}

// One /healthz query: ok, or the server's reason (its "error", else its status, else the HTTP
// status), or the transport's.
Status HealthzOk(const std::string& url, std::chrono::milliseconds timeout) {
  Result<HttpResponse> healthz = HttpGet(url, timeout);
  if (!healthz.ok()) return healthz.status();
  auto doc = ParseObject(healthz->body);
  const std::string status = doc ? String(*doc, "status") : "";
  if (healthz->status == 200 && status == "ok") return Status::Ok();
  const std::string error = doc ? String(*doc, "error") : "";
  return Status(Errc::kUnavailable, !error.empty()    ? error
                                    : !status.empty() ? status
                                                      : "HTTP " + std::to_string(healthz->status));
}

// How long the meta query is read again while it says not ready, where the answer fails for the
// moment an entry is applied (server_version.h, MetaHealthzFailsWhileApplying), and how often.
// One ok answer in the window is ready: a member that is really not ready (no meta leader, no
// word from it for two heartbeats, still recovering) says so for the whole window.
constexpr std::chrono::milliseconds kMetaSettleWindow{1000};
constexpr std::chrono::milliseconds kMetaSettlePoll{10};

// The clustered server's meta layer: ready, or the reason of its last answer.
Status MetaLayerReady(const std::string& url, const std::optional<ServerVersion>& version,
                      std::chrono::milliseconds timeout) {
  Status ready = HealthzOk(url, timeout);
  if (ready.ok() || !MetaHealthzFailsWhileApplying(version)) return ready;
  const auto deadline = std::chrono::steady_clock::now() + std::min(kMetaSettleWindow, timeout);
  while (!ready.ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kMetaSettlePoll);
    ready = HealthzOk(url, timeout);
  }
  return ready;
}

// The full /healthz with details=true: every stream and consumer it reports (2.10 on: the
// "errors" array; 2.9 ignores details and names at most one object in "error").
std::vector<ObjectHealth> UnhealthyObjects(const std::string& url,
                                           std::chrono::milliseconds timeout) {
  std::vector<ObjectHealth> objects;
  Result<HttpResponse> healthz = HttpGet(url, timeout);
  if (!healthz.ok()) return objects;
  auto doc = ParseObject(healthz->body);
  if (!doc) return objects;
  if (const rapidjson::Value* errors = Member(*doc, "errors"); errors && errors->IsArray()) {
    for (const auto& e : errors->GetArray()) {
      if (!e.IsObject()) continue;
      const std::string type = String(e, "type");
      ObjectHealth health;
      if (type == "STREAM") {
        health.kind = ObjectHealth::Kind::kStream;
      } else if (type == "CONSUMER") {
        health.kind = ObjectHealth::Kind::kConsumer;
        health.consumer = String(e, "consumer");
      } else {
        continue;
      }
      health.account = String(e, "account");
      health.stream = String(e, "stream");
      health.error = String(e, "error");
      if (!health.stream.empty()) objects.push_back(std::move(health));
    }
    return objects;
  }
  if (auto one = ObjectFromError(String(*doc, "error"))) objects.push_back(std::move(*one));
  return objects;
}

}  // namespace

ObservedServer ObserveServer(const std::string& monitor_url, std::chrono::milliseconds timeout) {
  ObservedServer server;
  server.monitor_configured = !monitor_url.empty();
  if (!server.monitor_configured) return server;

  const std::string base = WithoutTrailingSlashes(monitor_url);
  Result<HttpResponse> varz = HttpGet(base + "/varz", timeout);
  if (!varz.ok() || varz->status != 200) {
    server.not_ready_reason = varz.ok()
                                  ? "/varz answered HTTP " + std::to_string(varz->status)
                                  : "monitoring endpoint unreachable: " + varz.status().message();
    return server;
  }
  server.reachable = true;
  if (auto doc = ParseObject(varz->body)) {
    server.config_load_time_unix_ns = ParseRfc3339Nanos(String(*doc, "config_load_time"));
    server.server_name = String(*doc, "server_name");
    server.version = String(*doc, "version");
  }

  // /jsz: a clustered server reports its meta group; a standalone one has no "meta_cluster";
  // a server without JetStream answers {"disabled":true}.
  bool clustered = false;
  if (Result<HttpResponse> jsz = HttpGet(base + "/jsz", timeout); jsz.ok() && jsz->status == 200) {
    if (auto doc = ParseObject(jsz->body); doc && !doc->HasMember("disabled")) {
      if (const rapidjson::Value* limits = Member(*doc, "limits"); limits && limits->IsObject()) {
        if (const rapidjson::Value* max = Member(*limits, "default_max_consumers");
            max && max->IsInt64()) {
          server.default_max_consumers = std::max<int64_t>(0, max->GetInt64());
        }
      }
      if (!doc->HasMember("meta_cluster")) {  // present, even as null: the server is clustered
        server.jetstream_cluster_size = 1;
      } else {
        clustered = true;
        const rapidjson::Value* meta = Member(*doc, "meta_cluster");
        const rapidjson::Value* size =
            meta && meta->IsObject() ? Member(*meta, "cluster_size") : nullptr;
        if (size && size->IsInt()) server.jetstream_cluster_size = size->GetInt();
      }
    }
  }
  if (clustered) {
    // The meta group's size can lag the cluster: 2.10.27 was seen answering cluster_size 2 on
    // every member of a healthy 3-node cluster (one meta leader, /healthz ok) for over a
    // minute, and 3-replica streams would have been refused as unsatisfiable. The servers it
    // is routed to count too (every member of a mesh cluster runs JetStream).
    if (Result<HttpResponse> routez = HttpGet(base + "/routez", timeout);
        routez.ok() && routez->status == 200) {
      server.jetstream_cluster_size =
          std::max(server.jetstream_cluster_size, ServersByRoutes(routez->body));
    }
  }

  // The readiness gate (server/monitor.go healthz() at each tag; observers/server_version.h):
  // "js-enabled-only" checks that the server is up and JetStream enabled, and returns before
  // any stream is looked at, on every release from 2.9.10 on. In a cluster, the meta layer
  // query then checks the meta leader and that this server is current with it.
  Status ready = HealthzOk(base + "/healthz?js-enabled-only=true", timeout);
  if (ready.ok() && clustered) {
    const std::optional<ServerVersion> version = ParseServerVersion(server.version);
    ready = MetaLayerReady(base + "/healthz?" + HealthzMetaQuery(version), version, timeout);
  }
  server.ready = ready.ok();
  if (!ready.ok()) server.not_ready_reason = ready.message();

  // Per object: information, never a gate.
  if (server.ready) server.unhealthy = UnhealthyObjects(base + "/healthz?details=true", timeout);
  return server;
}

std::vector<ObjectHealth> ObserveUnhealthyObjects(const std::string& monitor_url,
                                                  std::chrono::milliseconds timeout) {
  const std::string base = WithoutTrailingSlashes(monitor_url);
  return UnhealthyObjects(base + "/healthz?details=true", timeout);
}

Result<std::string> ObserveConnectionAccount(const std::string& monitor_url, uint64_t cid,
                                             std::chrono::milliseconds timeout) {
  const std::string base = WithoutTrailingSlashes(monitor_url);
  Result<HttpResponse> connz =
      HttpGet(base + "/connz?auth=true&cid=" + std::to_string(cid), timeout);
  if (!connz.ok()) return connz.status();
  if (connz->status != 200) {
    return Status(Errc::kUnavailable, "/connz answered HTTP " + std::to_string(connz->status));
  }
  auto doc = ParseObject(connz->body);
  if (!doc) return Status(Errc::kInternal, "/connz: not a JSON object");
  const rapidjson::Value* connections = Member(*doc, "connections");
  if (connections != nullptr && connections->IsArray()) {
    for (const auto& c : connections->GetArray()) {
      if (!c.IsObject() || !c.HasMember("cid") || !c["cid"].IsUint64() ||
          c["cid"].GetUint64() != cid) {
        continue;
      }
      std::string account = String(c, "account");
      if (account.empty()) return Status(Errc::kUnavailable, "/connz names no account for it");
      return account;
    }
  }
  return Status(Errc::kUnavailable, "/connz lists no connection " + std::to_string(cid));
}

int ServersByRoutes(std::string_view routez_body) {
  auto doc = ParseObject(routez_body);
  if (!doc) return 0;
  const rapidjson::Value* routes = Member(*doc, "routes");
  if (routes == nullptr || !routes->IsArray()) return 0;
  std::set<std::string> peers;
  for (const auto& route : routes->GetArray()) {
    if (!route.IsObject()) continue;
    if (std::string name = String(route, "remote_name"); !name.empty()) peers.insert(name);
  }
  return static_cast<int>(peers.size()) + 1;
}

int64_t ParseRfc3339Nanos(const std::string& text) {
  // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+HH:MM|-HH:MM)
  auto year = Digits(text, 0, 4), month = Digits(text, 5, 2), day = Digits(text, 8, 2);
  auto hour = Digits(text, 11, 2), minute = Digits(text, 14, 2), second = Digits(text, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return 0;
  if (text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != 't') || text[13] != ':' ||
      text[16] != ':') {
    return 0;
  }
  // The calendar is Howard Hinnant's date (February 30th is not a day); the fields are read
  // here, not by date::parse, which takes an empty fraction and refuses more than nine digits
  // where RFC 3339 asks for one digit or more, any number.
  const date::year_month_day civil{date::year{static_cast<int>(*year)},
                                   date::month{static_cast<unsigned>(*month)},
                                   date::day{static_cast<unsigned>(*day)}};
  if (!civil.ok() || *hour > 23 || *minute > 59 || *second > 60) return 0;
  size_t pos = 19;
  int64_t nanos = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
      if (digits < 9) {
        nanos = nanos * 10 + (text[pos] - '0');
        ++digits;
      }
      ++pos;
    }
    if (digits == 0) return 0;
    for (; digits < 9; ++digits) nanos *= 10;
  }
  if (pos >= text.size()) return 0;
  int64_t offset_seconds = 0;
  if (text[pos] == 'Z' || text[pos] == 'z') {
    ++pos;
  } else if (text[pos] == '+' || text[pos] == '-') {
    auto off_hour = Digits(text, pos + 1, 2), off_minute = Digits(text, pos + 4, 2);
    if (!off_hour || !off_minute || text[pos + 3] != ':') return 0;
    offset_seconds = (*off_hour * 60 + *off_minute) * 60 * (text[pos] == '-' ? -1 : 1);
    pos += 6;
  } else {
    return 0;
  }
  if (pos != text.size()) return 0;
  const int64_t days = date::sys_days(civil).time_since_epoch().count();
  const int64_t seconds = days * 86400 + *hour * 3600 + *minute * 60 + *second - offset_seconds;
  return seconds * 1'000'000'000 + nanos;
}

}  // namespace mesh::observers
