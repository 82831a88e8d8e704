#include "observers/server_version.h"

#include <rapidjson/document.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/beast/core.hpp>
#include <charconv>

#include "model/json_read.h"
#include "observers/url.h"

namespace mesh::observers {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr size_t kMaxInfoBytes = 64 * 1024;

// One decimal component at the front of `text`, advancing it.
std::optional<int> Component(std::string_view& text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || value < 0) return std::nullopt;
  text.remove_prefix(static_cast<size_t>(end - text.data()));
  return value;
}

}  // namespace

std::string ServerVersion::ToString() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

std::optional<ServerVersion> ParseServerVersion(std::string_view text) {
  if (!text.empty() && (text.front() == 'v' || text.front() == 'V')) text.remove_prefix(1);
  ServerVersion v;
  auto major = Component(text);
  if (!major || text.empty() || text.front() != '.') return std::nullopt;
  text.remove_prefix(1);
  auto minor = Component(text);
  if (!minor) return std::nullopt;
  int patch = 0;
  if (!text.empty() && text.front() == '.') {
    text.remove_prefix(1);
    auto p = Component(text);
    if (!p) return std::nullopt;
    patch = *p;
  }
  if (!text.empty() && text.front() != '-' && text.front() != '+') return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  v.patch = patch;
  return v;
}

std::optional<rapidjson::Document> ParseInfo(std::string_view line) {
  if (line.substr(0, 5) != "INFO ") return std::nullopt;
  line.remove_prefix(5);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  return model::json::ParseObject(line);
}

std::optional<ServerVersion> ParseInfoVersion(std::string_view line) {
  std::optional<rapidjson::Document> json = ParseInfo(line);
  if (!json) return std::nullopt;
  const rapidjson::Value* version = model::json::Member(*json, "version");
  if (version == nullptr || !version->IsString()) return std::nullopt;
  return ParseServerVersion(std::string_view(version->GetString(), version->GetStringLength()));
}

Result<ServerVersion> ProbeServerVersion(const std::string& url,
                                         std::chrono::milliseconds timeout) {
  std::optional<ServerAddress> address = ParseServerAddress(url);
  if (!address)
    return Status(Errc::kInvalidArgument, "not a server address: " + UrlForMessages(url));
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  tcp::resolver resolver(ioc);
  std::string info;
  std::optional<Result<ServerVersion>> outcome;
  auto failed = [&](const char* stage, const beast::error_code& ec) {
    outcome = Status(ec == beast::error::timeout ? Errc::kTimeout : Errc::kUnavailable,
                     address->url + ": " + stage + ": " + ec.message());
  };
  stream.expires_after(timeout);
  resolver.async_resolve(
      address->host, address->port,
      [&](const beast::error_code& ec, const tcp::resolver::results_type& endpoints) {
        if (ec) return failed("resolve", ec);
        stream.async_connect(endpoints, [&](const beast::error_code& ec, const tcp::endpoint&) {
          if (ec) return failed("connect", ec);
          net::async_read_until(
              stream.socket(), net::dynamic_buffer(info, kMaxInfoBytes), "\r\n",
              [&](const beast::error_code& ec, size_t line_size) {
                if (ec) return failed("read INFO", ec);
                auto v = ParseInfoVersion(std::string_view(info).substr(0, line_size));
                if (!v) {
                  outcome = Status(Errc::kRefused, address->url + ": INFO names no version");
                } else {
                  outcome = *v;
                }
              });
        });
      });
  ioc.run_for(timeout + std::chrono::milliseconds(100));
  if (!outcome) return Status(Errc::kTimeout, address->url + ": no INFO in time");
  return *outcome;
}

bool SupportsConsumerActions(const ServerVersion& v) {
  return v >= ServerVersion{2, 10, 0};
}

std::string ToString(const ServerVersion& v) {
  return v.ToString();
}

const char* HealthzMetaQuery(const std::optional<ServerVersion>& version) {
  if (version && *version >= ServerVersion{2, 11, 0}) return "js-meta-only=true";
  return "js-server-only=true";
}

bool MetaHealthzFailsWhileApplying(const std::optional<ServerVersion>& version) {
  return !version || *version < ServerVersion{2, 9, 16};
}

bool HealthzShowsStoresOnDisk(const std::optional<ServerVersion>& version, Topology topology) {
  return topology == Topology::kStandalone && version && *version >= ServerVersion{2, 10, 0};
}

bool DeletionAnswerMarksStoreRemoved(const std::optional<ServerVersion>& version,
                                     Topology topology) {
  return topology == Topology::kStandalone && (!version || *version < ServerVersion{2, 10, 0});
}

bool HandlesApiRequestsInPlace(const std::optional<ServerVersion>& version) {
  return !version || *version < ServerVersion{2, 11, 10};
}

}  // namespace mesh::observers
