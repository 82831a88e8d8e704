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

// True when the URL carries a query string or a fragment ('?' or '#' anywhere after the
// scheme). A bus or monitoring address never needs one, and a query may carry credentials
// (`?user=u&pass=S`, `?token=...`, `?nkey=...`, `?jwt=...`): such URLs are refused, like
// userinfo, and never written to a message or a log.
bool HasQueryOrFragment(std::string_view url);

// The URL as it may appear in a message or a log: userinfo, query and fragment dropped
// ("nats://u:p@host:4222/?pass=S" -> "nats://host:4222/").
std::string UrlForMessages(std::string_view url);

// An address's authority split into host and port: "host", "host:port", "[v6]", "[v6]:port",
// ":port". The host loses its brackets; an IPv6 host must have them (a second ':' outside
// brackets is refused, as is anything but ':' after ']'). `port` is nullopt when the authority
// names none and "" for "host:": each caller decides what a missing or empty port means.
struct HostPort {
  std::string host;
  std::optional<std::string> port;
};
std::optional<HostPort> SplitHostPort(std::string_view authority);

// "host:port" as an address is written: an IPv6 host in brackets.
std::string JoinHostPort(std::string_view host, std::string_view port);

// A port as written in an address: 1 to 5 decimal digits, at most 65535 (0 included: the
// caller decides whether it means "any").
std::optional<int> ParsePort(std::string_view port);

// A bus server's address: "nats://[user:pass@]host[:port]", "tls://host:port" or "host:port"
// (port 4222 when absent); an IPv6 host is written in brackets. The userinfo is dropped.
struct ServerAddress {
  std::string host;  // without brackets
  std::string port;
  std::string url;  // "<scheme>://host:port" (brackets kept) for messages: never a credential
};
std::optional<ServerAddress> ParseServerAddress(std::string_view url);

}  // namespace mesh::observers
