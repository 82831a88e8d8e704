#include "observers/url.h"

#include <cctype>

namespace mesh::observers {

std::string StripUserInfo(std::string_view url) {
  const size_t scheme_end = url.find("://");
  const size_t authority_begin = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const size_t authority_end = url.find_first_of("/?#", authority_begin);
  const std::string_view authority = url.substr(
      authority_begin, authority_end == std::string_view::npos ? std::string_view::npos
                                                               : authority_end - authority_begin);
  const size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return std::string(url);
  std::string stripped(url.substr(0, authority_begin));
  stripped += url.substr(authority_begin + at + 1);
  return stripped;
}

bool HasQueryOrFragment(std::string_view url) {
  return url.find_first_of("?#") != std::string_view::npos;
}

std::string UrlForMessages(std::string_view url) {
  std::string stripped = StripUserInfo(url);
  const size_t scheme_end = stripped.find("://");
  const size_t authority_begin = scheme_end == std::string::npos ? 0 : scheme_end + 3;
  if (const size_t cut = stripped.find_first_of("/?#;", authority_begin);
      cut != std::string::npos) {
    stripped.erase(cut);
  }
  return stripped;
}

std::optional<std::string> RefusedUrlPart(std::string_view url, UrlPath path) {
  for (char c : url) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) return "a control character or space";
  }
  const size_t scheme_end = url.find("://");
  const size_t authority_begin = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const size_t authority_end = url.find_first_of("/?#;", authority_begin);
  const std::string_view authority = url.substr(
      authority_begin, authority_end == std::string_view::npos ? std::string_view::npos
                                                               : authority_end - authority_begin);
  const std::string_view rest =
      authority_end == std::string_view::npos ? std::string_view() : url.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) return "userinfo";
  if (rest.find('?') != std::string_view::npos) return "a query string";
  if (rest.find('#') != std::string_view::npos) return "a fragment";
  if (rest.find(';') != std::string_view::npos) return "parameters after ';'";
  if (path == UrlPath::kRefused && !rest.empty() && rest != "/") return "a path";
  if (authority.find('%') != std::string_view::npos) return "percent-encoding in the host or port";
  const std::optional<HostPort> split = SplitHostPort(authority);
  const bool bracketed = !authority.empty() && authority.front() == '[';
  auto plain_host = [&](const std::string& host) {
    if (host.empty()) return false;
    for (char c : host) {
      const bool ok =
          bracketed
              ? std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.'
              : std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
      if (!ok) return false;
    }
    return true;
  };
  if (!split || !plain_host(split->host)) return "a host that is not a plain name or IP address";
  if (split->port && !ParsePort(*split->port)) {
    return "a port that is not a number from 0 to 65535";
  }
  return std::nullopt;
}

std::optional<HostPort> SplitHostPort(std::string_view authority) {
  HostPort split;
  std::string_view after_host;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    split.host = std::string(authority.substr(1, close - 1));
    after_host = authority.substr(close + 1);
  } else {
    const size_t colon = authority.find(':');
    split.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) after_host = authority.substr(colon);
    if (after_host.find(':', 1) != std::string_view::npos) return std::nullopt;
  }
  if (!after_host.empty()) {
    if (after_host.front() != ':') return std::nullopt;
    split.port = std::string(after_host.substr(1));
  }
  return split;
}

std::string JoinHostPort(std::string_view host, std::string_view port) {
  // Appended in place into one buffer of the final size. Concatenating temporaries
  // ("[" + std::string(host) + "]" + ...) made g++ 12 at -O2/-O3 inline the rvalue operator+'s
  // insert-at-front and report a -Wrestrict overlap it cannot prove absent (a false positive
  // that failed every Release build under -Werror); appends have no such copy.
  const bool v6 = host.find(':') != std::string_view::npos;
  std::string joined;
  joined.reserve(host.size() + port.size() + (v6 ? 3 : 1));
  if (v6) joined += '[';
  joined += host;
  if (v6) joined += ']';
  joined += ':';
  joined += port;
  return joined;
}

std::optional<int> ParsePort(std::string_view port) {
  if (port.empty() || port.size() > 5) return std::nullopt;
  int value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value > 65535) return std::nullopt;
  return value;
}

std::optional<ServerAddress> ParseServerAddress(std::string_view url) {
  if (HasQueryOrFragment(url)) return std::nullopt;  // may carry credentials: never an address
  const std::string stripped = StripUserInfo(url);
  std::string_view rest = stripped;
  std::string scheme = "nats";
  if (const size_t end = rest.find("://"); end != std::string_view::npos) {
    scheme = std::string(rest.substr(0, end));
    rest.remove_prefix(end + 3);
  }
  if (const size_t end = rest.find_first_of("/?#"); end != std::string_view::npos) {
    rest = rest.substr(0, end);
  }
  std::optional<HostPort> split = SplitHostPort(rest);
  if (!split || split->host.empty()) return std::nullopt;
  ServerAddress address;
  address.host = std::move(split->host);
  address.port = split->port.value_or("");
  if (address.port.empty()) address.port = "4222";
  if (!ParsePort(address.port)) return std::nullopt;
  address.url = scheme + "://" + JoinHostPort(address.host, address.port);
  return address;
}

}  // namespace mesh::observers
