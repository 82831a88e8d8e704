#include "reconciler/http/http_handler.h"

#include <openssl/crypto.h>
#include <rapidjson/encodings.h>
#include <rapidjson/memorystream.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cctype>
#include <map>
#include <string_view>

#include "model/digest.h"
#include "reconciler/base/duration.h"
#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

constexpr const char* kJson = "application/json";
constexpr const char* kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

enum class Access { kOpen, kToken };

struct Route {
  const char* path;
  const char* method;
  Access access;
};

constexpr Route kRoutes[] = {
    {"/metrics", "GET", Access::kOpen},     {"/healthz", "GET", Access::kOpen},
    {"/readyz", "GET", Access::kOpen},      {"/drift", "GET", Access::kOpen},
    {"/reconcile", "POST", Access::kToken}, {"/hold", "POST", Access::kToken},
    {"/release", "POST", Access::kToken},
};

HttpReply Text(int status, std::string body) {
  HttpReply reply;
  reply.status = status;
  reply.body = std::move(body);
  if (reply.body.empty() || reply.body.back() != '\n') reply.body += '\n';
  return reply;
}

HttpReply Json(int status, std::string body) {
  HttpReply reply;
  reply.status = status;
  reply.content_type = kJson;
  reply.body = std::move(body);
  return reply;
}

// {"error": message}
HttpReply JsonError(int status, const std::string& message) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  writer.StartObject();
  writer.Key("error");
  writer.String(message.c_str(), static_cast<rapidjson::SizeType>(message.size()));
  writer.EndObject();
  return Json(status, std::string(buffer.GetString(), buffer.GetSize()) + "\n");
}

int StatusForError(const Status& status) {
  switch (status.code()) {
    case Errc::kTimeout:
      return 504;
    case Errc::kUnavailable:
      return 503;
    case Errc::kInvalidArgument:
      return 400;
    default:
      return 500;
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decoding, '+' as a space (what HTML forms and curl --data-urlencode send); nullopt on
// a '%' not followed by two hex digits.
std::optional<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] != '%') {
      out += text[i];
    } else {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = HexValue(text[i + 1]);
      const int low = HexValue(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    }
  }
  return out;
}

// "a=1&b=2" -> {a:1, b:2}, keys and values percent-decoded; nullopt on a repeated key, a key
// without '=', or a bad escape.
std::optional<std::map<std::string, std::string>> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> params;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    std::optional<std::string> key = PercentDecode(pair.substr(0, eq));
    std::optional<std::string> value = PercentDecode(pair.substr(eq + 1));
    if (!key || !value) return std::nullopt;
    if (!params.emplace(std::move(*key), std::move(*value)).second) return std::nullopt;
  }
  return params;
}

// Valid UTF-8 (RapidJSON's decoder: shortest forms, no surrogates) without control characters.
bool IsPrintableUtf8(std::string_view text) {
  rapidjson::MemoryStream stream(text.data(), text.size());
  while (stream.Tell() < text.size()) {
    unsigned code = 0;
    if (!rapidjson::UTF8<>::Decode(stream, &code)) return false;
    if (code < 0x20 || (code >= 0x7f && code < 0xa0)) return false;
  }
  return true;
}

// The optional reason=R of a hold or release: nullopt and `error` set when it is not acceptable.
std::optional<std::string> ReasonParam(const std::map<std::string, std::string>& params,
                                       std::string* error) {
  auto it = params.find("reason");
  if (it == params.end()) return std::string();
  if (std::string problem = HoldReasonProblem(it->second); !problem.empty()) {
    *error = "reason: " + problem;
    return std::nullopt;
  }
  return it->second;
}

// `schema`: null inside /drift (the document names its own).
void WriteHold(rapidjson::Writer<rapidjson::StringBuffer>& writer, const HoldState& hold,
               const char* schema) {
  writer.StartObject();
  if (schema != nullptr) {
    writer.Key("schema");
    writer.String(schema);
  }
  writer.Key("held");
  writer.Bool(hold.held);
  if (hold.held) {
    writer.Key("until");
    writer.String(FormatRfc3339Millis(hold.until_unix_ms).c_str());
    writer.Key("until_unix_ms");
    writer.Int64(hold.until_unix_ms);
    writer.Key("reason");
    writer.String(hold.reason.c_str(), static_cast<rapidjson::SizeType>(hold.reason.size()));
    writer.Key("by");
    writer.String(hold.by.c_str(), static_cast<rapidjson::SizeType>(hold.by.size()));
    writer.Key("scope");
    writer.String(ToString(hold.scope));
    if (hold.scope == HoldScope::kBus) {
      writer.Key("published");
      writer.Bool(hold.published);
      if (!hold.through.empty()) {
        writer.Key("through");
        writer.String(hold.through.c_str(), static_cast<rapidjson::SizeType>(hold.through.size()));
      }
      if (!hold.error.empty()) {
        writer.Key("error");
        writer.String(hold.error.c_str(), static_cast<rapidjson::SizeType>(hold.error.size()));
      }
    }
  }
  writer.EndObject();
}

// The last report's JSON object with "hold" (the hold now in force) right after its "schema"
// member (first when it has none): the report itself is serialised once per pass and shared, the
// hold is read now.
std::string WithHold(const std::string& report, const HoldState& hold) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  WriteHold(writer, hold, nullptr);
  const std::string member = "\"hold\":" + std::string(buffer.GetString(), buffer.GetSize());
  const size_t open = report.find('{');
  if (open == std::string::npos) return report;  // not an object: leave it as it is
  size_t next = open + 1;
  while (next < report.size() && std::isspace(static_cast<unsigned char>(report[next]))) ++next;
  if (next < report.size() && report[next] == '}') {
    return report.substr(0, open + 1) + member + report.substr(open + 1);
  }
  if (report.compare(next, 9, "\"schema\":") == 0) {
    // The schema's value is a plain identifier: no comma inside it.
    const size_t comma = report.find(',', next);
    if (comma != std::string::npos) {
      return report.substr(0, comma + 1) + member + "," + report.substr(comma + 1);
    }
  }
  return report.substr(0, open + 1) + member + "," + report.substr(open + 1);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The token of "Bearer <token>"; empty when the header has another form.
std::string_view BearerToken(std::string_view header) {
  constexpr std::string_view kScheme = "Bearer";
  if (header.size() <= kScheme.size() ||
      !EqualsIgnoreCase(header.substr(0, kScheme.size()), kScheme) ||
      header[kScheme.size()] != ' ') {
    return {};
  }
  std::string_view token = header.substr(kScheme.size() + 1);
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && token.back() == ' ') token.remove_suffix(1);
  return token;
}

bool TokenMatches(std::string_view presented, const std::string& expected_digest) {
  const std::string digest = model::Sha256(presented);
  return digest.size() == expected_digest.size() &&
         CRYPTO_memcmp(digest.data(), expected_digest.data(), digest.size()) == 0;
}

HttpReply Unauthorized() {
  HttpReply reply = Text(401, "unauthorized");
  reply.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"mesh-reconciler\"");
  return reply;
}

HttpReply HoldReply(const HoldState& hold) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  WriteHold(writer, hold, kHoldSchema);
  return Json(200, std::string(buffer.GetString(), buffer.GetSize()) + "\n");
}

HttpReply HandleHold(const HttpState& state, std::string_view query, const std::string& peer) {
  auto params = ParseQuery(query);
  if (!params) {
    return JsonError(400, "malformed query; expected ?for=DURATION[&reason=TEXT][&scope=bus|pod]");
  }
  auto it = params->find("for");
  const size_t expected = 1 + params->count("reason") + params->count("scope");
  if (it == params->end() || params->size() != expected) {
    return JsonError(
        400, "expected ?for=DURATION (e.g. 30m), at most a reason=TEXT and a scope=bus|pod");
  }
  HoldScope scope = state.DefaultHoldScope();
  if (auto named = params->find("scope"); named != params->end()) {
    std::optional<HoldScope> parsed = HoldScopeFromName(named->second);
    if (!parsed) return JsonError(400, "scope: expected bus or pod");
    scope = *parsed;
  }
  auto duration = ParseDuration(it->second);
  if (!duration.ok()) return JsonError(400, "for: " + duration.status().message());
  if (duration->count() <= 0 || *duration > kMaxHold) {
    return JsonError(400, "for: a hold lasts more than 0 and at most 24h");
  }
  std::string error;
  std::optional<std::string> reason = ReasonParam(*params, &error);
  if (!reason) return JsonError(400, error);
  auto hold = state.Hold(*duration, HoldRequest{std::move(*reason), peer}, scope);
  if (!hold.ok()) return JsonError(StatusForError(hold.status()), hold.status().message());
  return HoldReply(*hold);
}

HttpReply HandleRelease(const HttpState& state, std::string_view query, const std::string& peer) {
  auto params = ParseQuery(query);
  if (!params) return JsonError(400, "malformed query; expected nothing or ?reason=TEXT");
  if (params->size() != params->count("reason")) {
    return JsonError(400, "/release takes at most a reason=TEXT");
  }
  std::string error;
  std::optional<std::string> reason = ReasonParam(*params, &error);
  if (!reason) return JsonError(400, error);
  const bool was_held = state.Release(HoldRequest{std::move(*reason), peer});
  return Json(200, std::string("{\"schema\":\"") + kReleaseSchema +
                       "\",\"held\":false,\"was_held\":" + (was_held ? "true" : "false") + "}\n");
}

HttpReply Dispatch(const HttpState& state, std::string_view path, std::string_view query,
                   const std::string& peer) {
  if (path == "/metrics") {
    HttpReply reply;
    reply.content_type = kMetricsType;
    reply.body = state.MetricsText();
    return reply;
  }
  if (path == "/healthz") {
    const Health health = state.health();
    return health.alive ? Text(200, "ok") : Text(503, health.reason);
  }
  if (path == "/readyz") {
    const Readiness readiness = state.readiness();
    return readiness.ready ? Text(200, "ready") : Text(503, readiness.reason);
  }
  if (path == "/drift") {
    auto json = state.LastReportJson();
    if (!json) return JsonError(503, "no pass has finished yet");
    return Json(200, WithHold(*json, state.hold_state()));
  }
  if (path == "/reconcile") {
    if (!query.empty()) return JsonError(400, "/reconcile takes no parameters");
    auto report = state.ForcePass();
    if (!report.ok()) return JsonError(StatusForError(report.status()), report.status().message());
    return Json(200, std::move(*report));
  }
  if (path == "/hold") return HandleHold(state, query, peer);
  return HandleRelease(state, query, peer);  // "/release"
}

}  // namespace

namespace {

// What every request goes through before its endpoint: the target, the route, the method and
// the token. A reply here ends the request; otherwise `path` and `query` are set.
std::optional<HttpReply> Gate(const HttpState& state, const HttpRequest& request,
                              std::string_view* path, std::string_view* query) {
  if (request.target.empty() || request.target.front() != '/') {
    return Text(400, "bad request target");
  }
  const std::string_view target = request.target;
  const size_t question = target.find('?');
  *path = target.substr(0, question);
  *query = question == std::string_view::npos ? std::string_view() : target.substr(question + 1);

  const Route* route = nullptr;
  for (const Route& candidate : kRoutes) {
    if (*path == candidate.path) route = &candidate;
  }
  if (route == nullptr) return Text(404, "not found");
  const std::string_view method = route->method;
  // HEAD is a GET without the body (RFC 9110 9.3.2), for probes and monitors that send it.
  if (request.method != method && !(request.method == "HEAD" && method == "GET")) {
    HttpReply reply = Text(405, "method not allowed");
    reply.headers.emplace_back("Allow", method == "GET" ? "GET, HEAD" : route->method);
    return reply;
  }
  if (route->access == Access::kToken) {
    const std::optional<std::string> expected = state.TokenDigest();
    if (!expected && state.TokenFileConfigured()) {
      return Text(403,
                  "admin endpoints are disabled: the token file holds no usable token (empty, "
                  "weak or unreadable; the daemon's log says why)");
    }
    if (!expected) {
      return Text(403, "admin endpoints are disabled: start the daemon with --token-file");
    }
    const std::string_view token = BearerToken(request.authorization);
    if (token.empty() || !TokenMatches(token, *expected)) return Unauthorized();
  }
  return std::nullopt;
}

// A HEAD's reply from the GET's: the body's length kept, the body dropped.
HttpReply WithoutBody(HttpReply reply) {
  reply.head_length = reply.body.size();
  reply.body.clear();
  return reply;
}

}  // namespace

HttpReply HandleRequest(const HttpState& state, const HttpRequest& request) {
  std::string_view path;
  std::string_view query;
  HttpReply reply;
  if (std::optional<HttpReply> refused = Gate(state, request, &path, &query)) {
    reply = std::move(*refused);
  } else {
    reply = Dispatch(state, path, query, request.peer);
  }
  return request.method == "HEAD" ? WithoutBody(std::move(reply)) : reply;
}

uint64_t HandleRequestAsync(const HttpState& state, const HttpRequest& request,
                            const std::function<void(HttpReply)>& reply) {
  std::string_view path;
  std::string_view query;
  if (std::optional<HttpReply> refused = Gate(state, request, &path, &query)) {
    reply(request.method == "HEAD" ? WithoutBody(std::move(*refused)) : std::move(*refused));
    return 0;
  }
  if (path != "/reconcile" || !query.empty()) {
    HttpReply answer = Dispatch(state, path, query, request.peer);
    reply(request.method == "HEAD" ? WithoutBody(std::move(answer)) : std::move(answer));
    return 0;
  }
  return state.ForcePassAsync([reply](Result<std::shared_ptr<const std::string>> report) {
    if (!report.ok()) {
      reply(JsonError(StatusForError(report.status()), report.status().message()));
    } else {
      reply(Json(200, **report));
    }
  });
}

HttpReply ForcePassTimedOut(std::chrono::milliseconds waited) {
  return JsonError(504, "no pass finished within " + std::to_string(waited.count() / 1000) + " s");
}

const char* ToString(HoldScope v) {
  return kHoldScopeNames.Name(v);
}

std::optional<HoldScope> HoldScopeFromName(std::string_view name) {
  return kHoldScopeNames.Parse(name);
}

std::string HoldReasonProblem(std::string_view reason) {
  if (reason.size() > kMaxReasonBytes) {
    return "at most " + std::to_string(kMaxReasonBytes) + " bytes";
  }
  if (!IsPrintableUtf8(reason)) return "UTF-8 text without control characters";
  return {};
}

}  // namespace mesh::reconciler
