// libFuzzer target for the daemon's HTTP request path: the input is a raw byte stream as a client
// would send it on one connection. It is parsed with Beast's request_parser under the server's
// own limits (reconciler/http/http_wire.h: the parser setup, the message-to-request mapping and the
// 400/413/431 rejections the server uses); every request that parses is handed to the pure
// HandleRequest with a fixed fake daemon (tests/support/http_fakes.h: healthy, a pass already
// reported, an admin token), and pipelined requests follow while the connection would be kept
// alive.
//
// Invariants (a violation aborts):
//   - a reply's status is one the handler documents for that fake: 200, 400, 401, 404, 405; a
//     parse error maps to 400, 413 or 431 unless the input simply ended;
//   - no reply contains the admin token, or the request's Authorization value, unless the target
//     or body the client sent carries it;
//   - the fake is only asked to act (pass, hold, release) by a request carrying the token;
//   - 401 carries WWW-Authenticate: Bearer and nothing else; 405 carries Allow;
//   - no reply header holds CR or LF (no response splitting).
//
// Built with clang by -DMESH_BUILD_FUZZ=ON (target http_fuzz) and run by the fuzz stage of
// scripts/test.sh; every regular build replays its corpus and regressions (http_fuzz_replay).
// tests/fuzz/README.md says how a crash becomes a regression test.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "reconciler/http/http_handler.h"
#include "reconciler/http/http_server.h"
#include "reconciler/http/http_wire.h"
#include "tests/support/http_fakes.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using mesh::reconciler::HttpReply;
using mesh::reconciler::HttpRequest;

void Require(bool condition) {
  if (!condition) std::abort();
}

bool Contains(std::string_view haystack, std::string_view needle) {
  return !needle.empty() && haystack.find(needle) != std::string_view::npos;
}

bool ReplyContains(const HttpReply& reply, std::string_view needle) {
  if (Contains(reply.body, needle) || Contains(reply.content_type, needle)) return true;
  for (const auto& [name, value] : reply.headers) {
    if (Contains(name, needle) || Contains(value, needle)) return true;
  }
  return false;
}

std::string HeaderValue(const HttpReply& reply, std::string_view name) {
  for (const auto& [key, value] : reply.headers) {
    if (key == name) return value;
  }
  return "";
}

// The fake with a pass already reported (GET /drift answers 200).
struct FixedState : mesh::testing::FakeHttpState {
  FixedState() { report_ = std::make_shared<const std::string>("{\"pass_id\":9}"); }
};

int Actions(const mesh::testing::FakeHttpState& state) {
  return state.forced_ + state.held_ + state.released_;
}

void CheckReply(const mesh::testing::FakeHttpState& state, const HttpRequest& request) {
  const int actions_before = Actions(state);
  const HttpReply reply = mesh::reconciler::HandleRequest(state, request);
  const bool acted = Actions(state) != actions_before;

  const int status = reply.status;
  Require(status == 200 || status == 400 || status == 401 || status == 404 || status == 405);
  Require(!reply.content_type.empty());
  for (const auto& [name, value] : reply.headers) {
    Require(name.find_first_of("\r\n") == std::string::npos);
    Require(value.find_first_of("\r\n") == std::string::npos);
  }
  if (status == 401) {
    Require(reply.body == "unauthorized\n");
    Require(HeaderValue(reply, "WWW-Authenticate").rfind("Bearer", 0) == 0);
  }
  if (status == 405) {
    const std::string allow = HeaderValue(reply, "Allow");
    Require(allow == "GET, HEAD" || allow == "POST");  // HEAD beside every GET (issue 37)
  }

  const std::string_view token = mesh::testing::kFakeAdminToken;
  const bool client_sent_token = Contains(request.authorization, token);
  if (acted) Require(client_sent_token);
  if (ReplyContains(reply, token)) {
    Require(Contains(request.target, token) || Contains(request.body, token));
  }
  // The Authorization value is never copied into the reply: when it shows up, it must also show
  // up without it (a coincidence with fixed text), or come from the target or body.
  if (request.authorization.size() >= 8 && ReplyContains(reply, request.authorization) &&
      !Contains(request.target, request.authorization) &&
      !Contains(request.body, request.authorization)) {
    HttpRequest anonymous = request;
    anonymous.authorization.clear();
    Require(
        ReplyContains(mesh::reconciler::HandleRequest(state, anonymous), request.authorization));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mesh::reconciler::HttpServerOptions kOptions;  // the server's limits
  static const FixedState state;

  const char* at = reinterpret_cast<const char*>(data);
  size_t left = size;
  // One connection: requests follow each other while the connection would be kept alive.
  while (true) {
    mesh::reconciler::RequestParser parser;
    mesh::reconciler::ApplyLimits(parser, kOptions);
    beast::error_code ec;
    while (!parser.is_done()) {
      ec = {};
      const size_t used = parser.put(boost::asio::const_buffer(at, left), ec);
      at += used;
      left -= used;
      if (ec == http::error::need_more && used > 0) continue;
      if (ec == http::error::need_more || (!ec && used == 0)) {
        // The input ended: as when the client closes its side (http::read does the same).
        ec = {};
        if (parser.got_some()) {
          parser.put_eof(ec);
        } else {
          ec = http::error::end_of_stream;
        }
        if (!ec) Require(parser.is_done());
      }
      if (ec) break;
    }
    if (ec) {
      const bool ended = ec == http::error::end_of_stream || ec == http::error::partial_message;
      const std::optional<HttpReply> rejection = mesh::reconciler::RejectionFor(ec);
      Require(ended != rejection.has_value());
      if (rejection) {
        Require(rejection->status == 400 || rejection->status == 413 || rejection->status == 431);
      }
      return 0;
    }
    const auto& message = parser.get();
    CheckReply(state, mesh::reconciler::ToHttpRequest(message, "127.0.0.1:1"));
    if (!message.keep_alive() || left == 0) return 0;
  }
}
