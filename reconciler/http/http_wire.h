// How the HTTP listener reads a request off the wire: the parser and its limits, the mapping of
// a parsed message to the pure handler's HttpRequest, and the reply a parse error gets. Shared
// by the server (http_server.cc) and the fuzz target (tests/fuzz/http_fuzz.cc), so that what is
// fuzzed is what is served.
//
// Header-only (Beast is header-only). Thread-safety: pure functions over their arguments.
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "reconciler/http/http_handler.h"
#include "reconciler/http/http_server.h"

namespace mesh::reconciler {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Applies the server's header and body limits to a fresh parser.
inline void ApplyLimits(RequestParser& parser, const HttpServerOptions& options) {
  parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
  parser.body_limit(options.max_body_bytes);
}

// `peer`: the client's address and port, as the listener saw them.
inline HttpRequest ToHttpRequest(
    const boost::beast::http::request<boost::beast::http::string_body>& message, std::string peer) {
  namespace http = boost::beast::http;
  return HttpRequest{std::string(message.method_string()), std::string(message.target()),
                     std::string(message[http::field::authorization]), message.body(),
                     std::move(peer)};
}

// The reply to a request that could not be read: 413 for a body over the limit, 431 for headers
// over the limit, 400 for a malformed request. nullopt when nothing is to be answered (the
// client went away, timed out, or the connection failed): the connection is just closed.
inline std::optional<HttpReply> RejectionFor(const boost::beast::error_code& ec) {
  namespace http = boost::beast::http;
  auto reply = [](int status, const char* why) {
    HttpReply rejection;
    rejection.status = status;
    rejection.body = std::string(why) + "\n";
    return rejection;
  };
  if (ec == http::error::body_limit) return reply(413, "request body too large");
  if (ec == http::error::header_limit) return reply(431, "request header too large");
  static const auto& category = http::make_error_code(http::error::bad_method).category();
  if (ec.category() == category && ec != http::error::end_of_stream &&
      ec != http::error::partial_message) {
    return reply(400, "malformed request");
  }
  return std::nullopt;
}

}  // namespace mesh::reconciler
