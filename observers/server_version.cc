#include "observers/server_version.h"

#include <cctype>

namespace mesh::observers {
namespace {

// Reads a decimal number at `pos`, advancing it; nullopt when there is no digit.
std::optional<int> Number(const std::string& text, size_t& pos) {
  const size_t start = pos;
  int value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])) &&
         pos - start < 6) {
    value = value * 10 + (text[pos] - '0');
    ++pos;
  }
  if (pos == start) return std::nullopt;
  return value;
}

}  // namespace

std::optional<ServerVersion> ParseServerVersion(const std::string& text) {
  size_t pos = !text.empty() && (text[0] == 'v' || text[0] == 'V') ? 1 : 0;
  ServerVersion v;
  auto major = Number(text, pos);
  if (!major || pos >= text.size() || text[pos++] != '.') return std::nullopt;
  auto minor = Number(text, pos);
  if (!minor || pos >= text.size() || text[pos++] != '.') return std::nullopt;
  auto patch = Number(text, pos);
  if (!patch) return std::nullopt;
  if (pos < text.size() && text[pos] != '-' && text[pos] != '+') return std::nullopt;
  v.major = *major;
  v.minor = *minor;
  v.patch = *patch;
  return v;
}

std::string ToString(const ServerVersion& v) {
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

const char* HealthzMetaQuery(const std::optional<ServerVersion>& version) {
  if (version && *version >= ServerVersion{2, 11, 0}) return "js-meta-only=true";
  return "js-server-only=true";
}

bool HealthzShowsStoresOnDisk(const std::optional<ServerVersion>& version, Topology topology) {
  return topology == Topology::kStandalone && version && *version >= ServerVersion{2, 10, 0};
}

}  // namespace mesh::observers
