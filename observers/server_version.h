// The one place where nats-server version differences live: the version parsed from /varz (or
// a connection's INFO), and one free function per capability that differs between releases.
// What each release does is read from nats-server's own source at its tag (cited below).
//
// Thread-safety: values and free functions.
#pragma once

#include <optional>
#include <string>

namespace mesh::observers {

struct ServerVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
  bool operator==(const ServerVersion&) const = default;
  auto operator<=>(const ServerVersion&) const = default;
};

// "2.10.27", "v2.12.1", "2.11.0-RC.2" -> {2,10,27}, ...; nullopt when it is not a version.
std::optional<ServerVersion> ParseServerVersion(const std::string& text);
std::string ToString(const ServerVersion& v);  // "2.10.27"

// The /healthz query that checks a clustered server's meta layer (a meta leader known and this
// server current with it) and nothing per stream or consumer (server/monitor.go, healthz()):
//   2.9.10 to 2.10.x: "js-server-only=true" checks JetStream enabled, a meta leader, current;
//   2.11 on: "js-server-only=true" returns right after the server is up (it checks no
//            JetStream at all); "js-meta-only=true" (new in 2.11) checks JetStream enabled, a
//            meta leader, healthy (current), the meta layer recovered.
// Unknown version: the 2.9/2.10 query (on a newer server it checks less, never deadlocks).
// Standalone servers never use it: there, every release checks each stream's recovery before
// reading either flag (the `cc == nil` branch), so only "js-enabled-only=true" skips that.
const char* HealthzMetaQuery(const std::optional<ServerVersion>& version);

enum class Topology { kStandalone, kClustered };

// Whether the full /healthz names a stream whose store folder is still on disk but not loaded
// ("JetStream stream 'A > S' could not be recovered"): standalone servers from 2.10 on, which
// walk the store folder (the `cc == nil` branch of healthz()). A stream being deleted stays
// there until its folder is removed, so a recreation can wait for exactly that. 2.9 checks no
// stream on a standalone server; a cluster checks assignments, not folders.
bool HealthzShowsStoresOnDisk(const std::optional<ServerVersion>& version, Topology topology);

}  // namespace mesh::observers
