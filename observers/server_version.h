// The version of the nats-server the bus connection talks to, and what each version can do.
// Behaviour that differs between server versions is decided here, in one place, by a free
// function per capability (docs/conventions.md section 7.1 lists them).
//
// Thread-safety: pure functions, except ProbeServerVersion (its own socket per call).
#pragma once

#include <rapidjson/document.h>

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
std::string ToString(const ServerVersion& v);  // the same, as a free function

// "2.10.27", "v2.11.0", "2.12.0-RC.1" (a pre-release counts as its release); nullopt otherwise.
std::optional<ServerVersion> ParseServerVersion(std::string_view text);
// The JSON object of a server's greeting, `INFO {...}\r\n`; nullopt for any other line.
std::optional<rapidjson::Document> ParseInfo(std::string_view info_line);
// The version in a server's greeting, `INFO {...,"version":"2.10.27",...}\r\n`.
std::optional<ServerVersion> ParseInfoVersion(std::string_view info_line);

// Reads the INFO line a nats-server sends to every new client (before TLS and before CONNECT,
// so no credential is ever sent), then closes. `url` as in ParseServerAddress.
Result<ServerVersion> ProbeServerVersion(const std::string& url, std::chrono::milliseconds timeout);

// Consumer create/update with "action" on $JS.API.CONSUMER.CREATE.<stream>.<name> (2.10.0):
// a create refuses to overwrite (10148), an update refuses to create (10149). Before 2.10 only
// $JS.API.CONSUMER.DURABLE.CREATE, which creates or silently updates.
bool SupportsConsumerActions(const ServerVersion& v);

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

// Whether the meta query above says "JetStream is not current with the meta leader" for the
// moment a member has an entry of the meta group committed and not yet applied, the leader too:
// 2.9.0 to 2.9.15, whose healthz() asks meta.Current(), and v2.9.10 raft.go isCurrent() is
// false whenever commit != applied. From 2.9.16 on healthz() asks meta.Healthy(), which gives
// the gap 5 ms (2.9.16) or 10 ms (2.10 on) to shrink before it says so. On a cluster where
// another tenant creates and deletes streams, every one a meta entry, 2.9.10 answered so to 24
// to 29 of 60 passes (cluster_test.cc, "Another tenant churning streams"). Unknown: true.
bool MetaHealthzFailsWhileApplying(const std::optional<ServerVersion>& version);

enum class Topology { kStandalone, kClustered };

// Whether the full /healthz names a stream whose store folder is still on disk but not loaded
// ("JetStream stream 'A > S' could not be recovered"): standalone servers from 2.10 on, which
// walk the store folder (the `cc == nil` branch of healthz()). A stream being deleted stays
// there until its folder is removed, so a recreation can wait for exactly that. 2.9 checks no
// stream on a standalone server; a cluster checks assignments, not folders.
bool HealthzShowsStoresOnDisk(const std::optional<ServerVersion>& version, Topology topology);

// Whether the answer to a stream's deletion ($JS.API.STREAM.DELETE, and the API audit advisory
// sent right after it, observers/api_audit.h) comes only once the stream's store folder is
// removed: standalone servers before 2.10. jsStreamDeleteRequest answers when mset.delete()
// returns, and (*stream).stop calls store.Delete() in line, which on 2.9 removes the folder
// there (v2.9.10 filestore.go, os.RemoveAll). From 2.10 on the folder is renamed aside there and
// removed in the background (v2.10.27), and /healthz names it until then. In a cluster the meta
// leader answers once the deletion is proposed, before any peer removed anything. Unknown
// version: as 2.9.
bool DeletionAnswerMarksStoreRemoved(const std::optional<ServerVersion>& version,
                                     Topology topology);

// Whether the server handles a client connection's JetStream API requests one after another, in
// that connection's read loop (server/jetstream_api.go, apiDispatch(): "If this is directly from
// a client connection ok to do in place"): 2.9.0 to 2.11.9. From 2.11.10 on (nats-server commit
// b7600b763, "Always handle JS API requests from pool") every request goes to a pool of
// min(GOMAXPROCS, 16) goroutines, whichever connection it came on. Where they are handled in
// place, requests spread over several connections are handled side by side (BusConnection's
// lanes). Unknown version: true (more connections work on every version).
bool HandlesApiRequestsInPlace(const std::optional<ServerVersion>& version);

}  // namespace mesh::observers
