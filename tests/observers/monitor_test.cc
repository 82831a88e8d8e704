// The monitoring-endpoint observer and its HTTP client (deadline and errors), RFC 3339 parsing,
// and /healthz, /varz and /jsz of a real nats-server.
#include "observers/monitor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include "observers/http_client.h"
#include "observers/unique_fd.h"
#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

using testing::NatsServer;

constexpr auto kTimeout = std::chrono::seconds(2);

TEST_CASE("ParseRfc3339Nanos reads UTC, offsets and any fraction", "[observers]") {
  CHECK(ParseRfc3339Nanos("1970-01-01T00:00:00Z") == 0);
  CHECK(ParseRfc3339Nanos("2026-11-29T10:55:30.123456789Z") == 1795949730123456789);
  CHECK(ParseRfc3339Nanos("2026-11-29T11:55:30.123456789+01:00") == 1795949730123456789);
  CHECK(ParseRfc3339Nanos("2026-11-29T05:25:30.123456789-05:30") == 1795949730123456789);
  CHECK(ParseRfc3339Nanos("2000-02-29T23:59:59.5Z") == 951868799'500'000'000);
  CHECK(ParseRfc3339Nanos("2000-02-29T23:59:59.1234567891Z") == 951868799'123'456'789);
  CHECK(ParseRfc3339Nanos("1969-12-31T23:00:00Z") == -3600'000'000'000);
  CHECK(ParseRfc3339Nanos("2024-02-29T00:00:00Z") == 1709164800'000'000'000);  // a leap day
}

TEST_CASE("ParseRfc3339Nanos gives 0 for what is not RFC 3339", "[observers]") {
  CHECK(ParseRfc3339Nanos("") == 0);
  CHECK(ParseRfc3339Nanos("yesterday") == 0);
  CHECK(ParseRfc3339Nanos("2026-11-29T10:55:30") == 0);    // no zone
  CHECK(ParseRfc3339Nanos("2026-11-29 10:55:30Z") == 0);   // no T
  CHECK(ParseRfc3339Nanos("2026-13-29T10:55:30Z") == 0);   // month 13
  CHECK(ParseRfc3339Nanos("2026-02-30T10:55:30Z") == 0);   // February 30th
  CHECK(ParseRfc3339Nanos("2025-02-29T10:55:30Z") == 0);   // not a leap year
  CHECK(ParseRfc3339Nanos("2026-04-31T10:55:30Z") == 0);   // April 31st
  CHECK(ParseRfc3339Nanos("2026-11-29T10:55:30.Z") == 0);  // empty fraction
  CHECK(ParseRfc3339Nanos("2026-11-29T10:55:30Zjunk") == 0);
  CHECK(ParseRfc3339Nanos("2026-11-29T10:55:30+0100") == 0);
}

TEST_CASE("JetStreamClusterSize prefers the monitor's count over the bus's lower bound",
          "[observers]") {
  ObservedState state;
  state.jetstream.cluster_size = 2;
  CHECK(JetStreamClusterSize(state) == 2);  // monitor unknown
  state.server.jetstream_cluster_size = 5;
  CHECK(JetStreamClusterSize(state) == 5);
}

TEST_CASE("ServersByRoutes counts distinct peers, pooled routes once, plus itself", "[observers]") {
  // 2.10 pools routes: several per peer, each naming it (/routez as 2.10.27 answers).
  CHECK(ServersByRoutes(R"({"num_routes":4,"routes":[{"rid":1,"remote_name":"n2"},)"
                        R"({"rid":2,"remote_name":"n2"},{"rid":3,"remote_name":"n3"},)"
                        R"({"rid":4,"remote_name":"n3"}]})") == 3);
  CHECK(ServersByRoutes(R"({"num_routes":0,"routes":[]})") == 1);
  CHECK(ServersByRoutes(R"({"routes":[{"rid":1},{"rid":2,"remote_name":""}]})") == 1);
  CHECK(ServersByRoutes("not json") == 0);
  CHECK(ServersByRoutes(R"({"routes":{}})") == 0);
}

TEST_CASE("HttpGet errors name scheme, host and port, never credentials, path or query",
          "[observers]") {
  const int closed = testing::FreePort();
  auto reply = HttpGet(
      "http://user:hunter2@127.0.0.1:" + std::to_string(closed) + "/S3CR/varz?t=S3CR", kTimeout);
  REQUIRE_FALSE(reply.ok());
  const std::string message = reply.status().ToString();
  INFO(message);
  CHECK(reply.status().code() == Errc::kUnavailable);
  CHECK(message.find("GET http://127.0.0.1:" + std::to_string(closed) + ": ") != std::string::npos);
  CHECK(message.find("hunter2") == std::string::npos);
  CHECK(message.find("S3CR") == std::string::npos);  // a path or a query may carry a secret
  CHECK(message.find("user") == std::string::npos);

  // https:// is spoken too (verified TLS): its errors name the address the same way.
  auto secure =
      HttpGet("https://user:hunter2@127.0.0.1:" + std::to_string(closed) + "/varz", kTimeout);
  REQUIRE_FALSE(secure.ok());
  CHECK(secure.status().code() == Errc::kUnavailable);
  CHECK(secure.status().message().find("https://127.0.0.1:" + std::to_string(closed) + ": ") !=
        std::string::npos);
  CHECK(secure.status().message().find("hunter2") == std::string::npos);

  CHECK(HttpGet("ftp://127.0.0.1/varz", kTimeout).status().code() == Errc::kInvalidArgument);
  CHECK(HttpGet("127.0.0.1:8222", kTimeout).status().code() == Errc::kInvalidArgument);
  // As a bus address and --listen: an IPv6 host in brackets, a port from 0 to 65535.
  for (const char* url : {"http://::1:8222/varz", "http://127.0.0.1:82x2/varz",
                          "http://127.0.0.1:65536/varz", "http://127.0.0.1:/varz"}) {
    INFO(url);
    CHECK(HttpGet(url, kTimeout).status().code() == Errc::kInvalidArgument);
  }
}

TEST_CASE("HttpGet gives up at its deadline when the peer never answers", "[observers]") {
  // A listening socket that never accepts: the connection is queued, no answer ever comes.
  UniqueFd listener(new int(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)));
  REQUIRE(*listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(*listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(listen(*listener, 4) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(getsockname(*listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/varz";

  const auto start = std::chrono::steady_clock::now();
  auto reply = HttpGet(url, std::chrono::milliseconds(200));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(reply.ok());
  CHECK(reply.status().code() == Errc::kTimeout);
  CHECK(elapsed >= std::chrono::milliseconds(200));
  CHECK(elapsed < std::chrono::seconds(2));

  ObservedServer server = ObserveServer("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)),
                                        std::chrono::milliseconds(200));
  CHECK(server.monitor_configured);
  CHECK_FALSE(server.reachable);
}

TEST_CASE("An unreachable or unconfigured monitor is data, not an error", "[observers]") {
  ObservedServer unreachable =
      ObserveServer("http://127.0.0.1:" + std::to_string(testing::FreePort()), kTimeout);
  CHECK(unreachable.monitor_configured);
  CHECK_FALSE(unreachable.reachable);
  CHECK_FALSE(unreachable.ready);
  CHECK(unreachable.config_load_time_unix_ns == 0);

  ObservedServer unconfigured = ObserveServer("", kTimeout);
  CHECK_FALSE(unconfigured.monitor_configured);
  CHECK_FALSE(unconfigured.reachable);
}

TEST_CASE("ObserveServer reads a healthy server's health, identity and load time",
          "[observers][integration][server]") {
  auto server = NatsServer::Start({});
  ObservedServer observed = ObserveServer(server->monitor_url(), kTimeout);
  CHECK(observed.monitor_configured);
  CHECK(observed.reachable);
  CHECK(observed.ready);
  CHECK(observed.not_ready_reason.empty());
  CHECK(observed.server_name == "n" + std::to_string(server->port()));
  CHECK(observed.version == testing::ServerBinaryVersion());
  CHECK(observed.jetstream_cluster_size == 1);
  const auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(observed.config_load_time_unix_ns > now_ns - int64_t{60} * 1'000'000'000);
  CHECK(observed.config_load_time_unix_ns <= now_ns);
  CHECK(ObserveServer(server->monitor_url() + "/", kTimeout).reachable);  // trailing slash
}

TEST_CASE("config_load_time moves when the server reloads on SIGHUP",
          "[observers][integration][server]") {
  auto server = NatsServer::Start({});
  const int64_t before = ObserveServer(server->monitor_url(), kTimeout).config_load_time_unix_ns;
  REQUIRE(before > 0);
  REQUIRE(kill(server->pid(), SIGHUP) == 0);
  CHECK(testing::WaitFor([&] {
    return ObserveServer(server->monitor_url(), kTimeout).config_load_time_unix_ns > before;
  }));
}

// nats-server 2.15 limits every stream to default_max_consumers consumers unless the stream
// sets its own (1,000 by default); the plan must know it to not send creations it refuses.
TEST_CASE("ObserveServer reads the server's default consumer limit where it has one",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  options.default_max_consumers = 1234;
  auto server = NatsServer::Start(options);
  ObservedServer observed = ObserveServer(server->monitor_url(), kTimeout);
  INFO(testing::ServerBinaryVersion());
  CHECK(observed.default_max_consumers == (testing::ServerHasDefaultMaxConsumers() ? 1234 : 0));
}

TEST_CASE("A cluster member without a meta leader is reachable but not ready",
          "[observers][integration][server]") {
  // Routes to two members that never start: JetStream cannot form its meta group.
  testing::NatsServerOptions options;
  options.cluster_port = testing::FreePort();
  options.route_ports = {testing::FreePort(), testing::FreePort()};
  options.wait_healthy = false;
  auto server = NatsServer::Start(options);
  ObservedServer observed = ObserveServer(server->monitor_url(), kTimeout);
  INFO(observed.not_ready_reason);
  CHECK(observed.reachable);
  CHECK_FALSE(observed.ready);
  // The server's words, from the meta layer query of its version (2.9/2.10 js-server-only,
  // 2.11 on js-meta-only).
  // 2.14.5's monitor.go checks "recovering" before "no leader" (healthz: "JetStream is still
  // recovering meta layer"), and 2.15.1 answers that here; older ones the other.
  CHECK((observed.not_ready_reason == "JetStream has not established contact with a meta leader" ||
         observed.not_ready_reason == "JetStream is still recovering meta layer"));
}

}  // namespace
}  // namespace mesh::observers
