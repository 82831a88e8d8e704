// The server's monitoring endpoint (http://host:8222): /healthz and /varz.
// A small synchronous HTTP/1.1 client on Boost.Beast with a deadline on every request, for
// http:// and https:// URLs. HTTPS always verifies the peer: its chain must end at a trusted CA
// (HttpCall::ca_file, else the system's CAs) and its certificate must name the URL's host (a DNS
// subjectAltName, or an IP subjectAltName for an IP literal); TLS 1.2 or later.
//
// Thread-safety: free functions; each call uses its own socket.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/result.h"
#include "observers/observed.h"

namespace mesh::observers {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET `url` (http[s]://host:port/path). Errors name the address, never a credential.
Result<HttpResponse> HttpGet(const std::string& url, std::chrono::milliseconds timeout);

// Any method, with extra headers and a body (the on-call CLI's POSTs to a running daemon).
// Header values are never put in an error message (they may carry a bearer token).
struct HttpCall {
  std::string method = "GET";
  std::string url;  // http://... or https://...
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // https: trust only the CAs of this PEM file (never the system's); empty: the system's CAs.
  // Ignored for http://.
  std::string ca_file;
};
Result<HttpResponse> HttpSend(const HttpCall& call, std::chrono::milliseconds timeout);

// Reads /healthz and /varz from `monitor_url` (e.g. http://127.0.0.1:8222). An unreachable
// endpoint is data (reachable=false), not an error.
ObservedServer ObserveServer(const std::string& monitor_url, std::chrono::milliseconds timeout);

// Only what the full /healthz (details=true) reports per stream and consumer; empty when the
// endpoint cannot be read.
std::vector<ObjectHealth> ObserveUnhealthyObjects(const std::string& monitor_url,
                                                  std::chrono::milliseconds timeout);

// "2026-11-29T10:55:30.123456789Z" -> Unix ns; 0 when it cannot be parsed.
int64_t ParseRfc3339Nanos(const std::string& text);

// The servers this one has routes to, by distinct remote_name in a /routez body (2.10 pools
// several routes per peer), plus itself; 0 when the body cannot be read.
int ServersByRoutes(std::string_view routez_body);

}  // namespace mesh::observers
