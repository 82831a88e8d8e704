// The server's monitoring endpoint (http://host:8222): /varz, /jsz, /routez and /healthz, read
// through observers/http_client.h.
//
// Thread-safety: free functions; each call uses its own socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "observers/observed.h"

namespace mesh::observers {

// Reads /healthz and /varz from `monitor_url` (e.g. http://127.0.0.1:8222). An unreachable
// endpoint is data (reachable=false), not an error.
ObservedServer ObserveServer(const std::string& monitor_url, std::chrono::milliseconds timeout);

// Only what the full /healthz (details=true) reports per stream and consumer; empty when the
// endpoint cannot be read.
std::vector<ObjectHealth> ObserveUnhealthyObjects(const std::string& monitor_url,
                                                  std::chrono::milliseconds timeout);

// The account of the client connection `cid` (BusConnection::client_id), from
// /connz?cid=<cid>&auth=true (2.9.10 on); kUnavailable when it lists no such connection.
Result<std::string> ObserveConnectionAccount(const std::string& monitor_url, uint64_t cid,
                                             std::chrono::milliseconds timeout);

// "2026-11-29T10:55:30.123456789Z" -> Unix ns; 0 when it cannot be parsed.
int64_t ParseRfc3339Nanos(const std::string& text);

// The servers this one has routes to, by distinct remote_name in a /routez body (2.10 pools
// several routes per peer), plus itself; 0 when the body cannot be read.
int ServersByRoutes(std::string_view routez_body);

}  // namespace mesh::observers
