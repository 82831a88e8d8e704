// Test support: a real nats-server (the Debian package) started on free loopback ports in its
// own temporary folder, with JetStream, a monitoring port, a pid file, and a main configuration
// that includes "users.conf" beside it (the layout the chart uses). Stopped by PID.
//
// Synchronisation is by waiting on conditions (WaitFor), never by fixed sleeps.
// Thread-safety: one test thread drives a NatsServer.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mesh::testing {

// A TCP port on 127.0.0.1 that was free a moment ago: a random one below the kernel's
// ephemeral range (so no outgoing connection can be given it meanwhile), never the same twice
// in one process.
int FreePort();

// A new empty folder under $TMPDIR (removed by the caller, or left for post-mortems on failure).
std::string MakeTempDir(const std::string& prefix);

// Polls `condition` every few milliseconds until it holds or `deadline` passes.
bool WaitFor(const std::function<bool()>& condition,
             std::chrono::milliseconds deadline = std::chrono::seconds(20));

// The nats-server binary the tests run: $MESH_NATS_SERVER when set (scripts/test.sh points it at
// Debian 13's 2.10.27, fetched by scripts/fetch-nats-server.sh), else Debian 12's
// /usr/sbin/nats-server (2.9.10). Inside a Catch2 test case that is not tagged [server] it
// throws std::logic_error: the tag is what registers a test case for the second run against
// the other server of the matrix (CMakeLists.txt), so every test that runs a server must carry it.
std::string ServerBinary();
// That binary's version as `nats-server --version` prints it, without the "v": "2.9.10".
// Throws std::runtime_error when it cannot be run or read.
std::string ServerBinaryVersion();
// Whether that binary has the jetstream limit default_max_consumers (2.15 on).
bool ServerHasDefaultMaxConsumers();

// Set by the test main (tests/main_test.cc) when a test case starts and ends, so that
// ServerBinary() can refuse a test case without the [server] tag.
enum class CurrentTestTag { kNoTestCase, kServer, kNotServer };
void SetCurrentTestCase(const std::string& name, CurrentTestTag tag);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& bytes);

struct NatsServerOptions {
  // Written to <dir>/users.conf before start. Must define the account(s) and users; an empty
  // string starts the server with a users.conf holding one no-permission-limits user
  // "admin"/"admin" in account MESH with JetStream enabled.
  std::string users_conf;
  std::string server_name;  // default "n<port>"
  // Cluster: routes to these ports (other members' cluster ports); empty for standalone.
  int cluster_port = 0;  // 0: no cluster block
  std::vector<int> route_ports;
  std::string cluster_name = "mesh";
  // Start() waits for /healthz ok (standalone: ?js-enabled-only=true, see Launch).
  bool wait_healthy = true;
  // Appended to the main configuration, e.g. a `tls { cert_file: ..., key_file: ... }` block.
  std::string extra_config;
  // Non-empty: the operator's own accounts, e.g. `OTHER: { users: [...] }`. The main
  // configuration then includes users.conf inside its accounts block, beside these
  // (`accounts { include "users.conf" <other_accounts> }`): users.conf is one account entry, as
  // mesh-reconciler renders it with --users-scope account.
  std::string other_accounts;
  // nats-server 2.15 on: `jetstream { limits { default_max_consumers } }`, the consumers a
  // stream without a max_consumers of its own may hold (the server's default is 1,000). 0
  // keeps the server's default. Not written for older servers, which have no such limit and
  // refuse the field.
  int64_t default_max_consumers = 0;
};

class NatsServer {
 public:
  // Starts the server and waits until it accepts clients (and /healthz is ok if asked).
  // Throws std::runtime_error (with the server's log tail) when it cannot start: a test failure.
  static std::unique_ptr<NatsServer> Start(const NatsServerOptions& options);
  ~NatsServer();  // Stop()

  void Stop();  // SIGTERM to our PID, wait; SIGKILL after a deadline
  void Kill();  // SIGKILL, no cleanup (a crash)
  // SIGSTOP, then waits until every thread of the server has stopped: kill() returns before
  // the stop lands, and a server still answering for a moment would race the test. Throws
  // std::runtime_error when the threads do not all stop within 10 s.
  void Freeze();
  void Thaw();       // SIGCONT
  void Restart();    // Stop() then start again with the same folder, ports and config
  void WipeStore();  // removes the JetStream store directory (server must be stopped)
  bool running() const;

  pid_t pid() const;
  int port() const;
  int monitor_port() const;
  std::string url() const;          // nats://127.0.0.1:<port>
  std::string monitor_url() const;  // http://127.0.0.1:<monitor_port>
  std::string dir() const;
  std::string users_file() const;   // <dir>/users.conf
  std::string pid_file() const;     // <dir>/nats.pid
  std::string store_dir() const;    // <dir>/jetstream
  std::string log_file() const;     // <dir>/nats.log
  std::string main_config() const;  // <dir>/nats.conf

 private:
  NatsServer() = default;
  void Launch();
  NatsServerOptions options_;
  std::string dir_;
  int port_ = 0;
  int monitor_port_ = 0;
  pid_t pid_ = -1;
};

// What the monitoring endpoint's /jsz says: the server's stream and consumer counts and, in a
// cluster, its view of the JetStream meta group.
struct Jsz {
  int64_t streams = 0;
  int64_t consumers = 0;
  bool has_meta = false;         // a meta_cluster object was reported (clustered)
  std::string meta_leader;       // empty when it names none
  std::optional<int> meta_size;  // meta_cluster.cluster_size, when reported
  // The leader's view only (meta_cluster.replicas): the other members of the meta group, by
  // server name. Empty from a follower.
  std::vector<std::string> meta_replicas;
  int64_t api_total = 0;  // api.total: JetStream API requests the server has answered, all clients
};
// nullopt when the server is stopped, does not answer, or answers something else than JSON.
std::optional<Jsz> JszOf(const NatsServer& server);

// The monitoring endpoint's stream count (from /jsz), or -1 when it does not answer.
int StreamsOnServer(const NatsServer& server);

}  // namespace mesh::testing
