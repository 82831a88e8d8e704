// A small synchronous HTTP/1.1 client on Boost.Beast with a deadline on every request, for
// http:// and https:// URLs: the transport the monitoring reads go through (monitor.h), and the
// on-call CLI's calls to its own daemon. Nothing here talks to the bus. HTTPS always verifies
// the peer: its chain must end at a trusted CA (HttpCall::ca_file, else the system's CAs) and
// its certificate must name the URL's host (a DNS subjectAltName, or an IP subjectAltName for
// an IP literal); TLS 1.2 or later.
//
// Thread-safety: free functions; each call uses its own socket.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "model/result.h"

namespace mesh::observers {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// GET `url` (http[s]://host:port/path). Errors name scheme, host and port only: never userinfo,
// the path or a query (any of them may carry a credential).
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

}  // namespace mesh::observers
