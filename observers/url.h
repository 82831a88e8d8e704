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

// The URL as it may appear in a message or a log: scheme, host and port only; userinfo, path,
// ';' parameters, query and fragment dropped ("nats://u:p@host:4222/S?pass=S" ->
// "nats://host:4222").
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

// Whether an address may carry a path: http(s) has one (nats-server's monitoring endpoint under
// an `http_base_path`, a daemon behind a proxy's prefix); nats:// and tls:// have none.
enum class UrlPath { kRefused, kAllowed };

// An address given to a flag must be a plain "scheme://host[:port]" (or "host:port"), plus a
// path where `path` allows one. Anything more may carry a secret ("nats://h:4222;pass=S",
// "nats://h:4222/S", "nats://h:4222/%3Fpass=S", "http://h/?token=S"), so the first such part is
// named ("userinfo", "a query string", "a fragment", "parameters after ';'", "a path",
// "percent-encoding in the host or port", "a host that is not a plain name or IP address", "a port
// that is not a number from 0 to 65535", "a control character or space"); nullopt when the address
// is plain. The name never quotes the URL: the caller may put it in a message as it is. A lone
// trailing '/' is no path.
std::optional<std::string> RefusedUrlPart(std::string_view url, UrlPath path);

// A bus server's address: "nats://[user:pass@]host[:port]", "tls://host:port" or "host:port"
// (port 4222 when absent); an IPv6 host is written in brackets. The userinfo is dropped.
struct ServerAddress {
  std::string host;  // without brackets
  std::string port;
  std::string url;  // "<scheme>://host:port" (brackets kept) for messages: never a credential
};
std::optional<ServerAddress> ParseServerAddress(std::string_view url);

}  // namespace mesh::observers
