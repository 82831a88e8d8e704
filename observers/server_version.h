// The version of the nats-server the bus connection talks to, and what each version can do.
// Behaviour that differs between server versions is decided here, in one place, by a free
// function per capability (docs/conventions.md section 7.2 lists them).
//
// Thread-safety: pure functions, except ProbeServerVersion (its own socket per call).
#pragma once

#include <chrono>
#include <compare>
#include <optional>
#include <string>
#include <string_view>

#include "model/result.h"

namespace mesh::observers {

struct ServerVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  auto operator<=>(const ServerVersion&) const = default;
  std::string ToString() const;  // "2.10.27"
};

// "2.10.27", "v2.11.0", "2.12.0-RC.1" (a pre-release counts as its release); nullopt otherwise.
std::optional<ServerVersion> ParseServerVersion(std::string_view text);
// The version in a server's greeting, `INFO {...,"version":"2.10.27",...}\r\n`.
std::optional<ServerVersion> ParseInfoVersion(std::string_view info_line);

// Reads the INFO line a nats-server sends to every new client (before TLS and before CONNECT,
// so no credential is ever sent), then closes. `url` as in ParseServerAddress.
Result<ServerVersion> ProbeServerVersion(const std::string& url, std::chrono::milliseconds timeout);

// Consumer create/update with "action" on $JS.API.CONSUMER.CREATE.<stream>.<name> (2.10.0):
// a create refuses to overwrite (10148), an update refuses to create (10149). Before 2.10 only
// $JS.API.CONSUMER.DURABLE.CREATE, which creates or silently updates.
bool SupportsConsumerActions(const ServerVersion& v);

}  // namespace mesh::observers
