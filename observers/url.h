// URL helpers shared by the observers: an address in a message or a log never carries a
// credential.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace mesh::observers {

// "nats://user:pass@host:4222" -> "nats://host:4222"; a URL without userinfo is unchanged.
std::string StripUserInfo(std::string_view url);

// A bus server's address: "nats://[user:pass@]host[:port]", "tls://host:port" or "host:port"
// (port 4222 when absent); an IPv6 host is written in brackets. The userinfo is dropped.
struct ServerAddress {
  std::string host;  // without brackets
  std::string port;
  std::string url;  // "<scheme>://host:port" (brackets kept) for messages: never a credential
};
std::optional<ServerAddress> ParseServerAddress(std::string_view url);

}  // namespace mesh::observers
