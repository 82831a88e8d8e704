// The Beast listener on a real loopback socket: limits, malformed input, slow clients,
// keep-alive, tokens, and a blocking handler that does not stop the others.
#include "reconciler/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "model/digest.h"
#include "observers/http_client.h"
#include "tests/support/nats_server.h"
#include "tests/support/raw_client.h"

namespace mesh::reconciler::test {
namespace {

using mesh::testing::WaitFor;
using std::chrono::milliseconds;

constexpr char kToken[] = "server-test-token";
constexpr auto kClientTimeout = std::chrono::seconds(5);

// A daemon stand-in whose forced pass blocks until the test lets it go.
class BlockingState : public HttpState {
 public:
  std::string MetricsText() const override { return "mesh_reconciler_bus_connected 1\n"; }
  Health health() const override { return {true, "alive"}; }
  Readiness readiness() const override { return {true, "ready"}; }
  std::shared_ptr<const std::string> LastReportJson() const override { return nullptr; }
  std::optional<std::string> TokenDigest() const override { return model::Sha256(kToken); }
  Result<std::string> ForcePass() const override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++forcing_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return !block_; });
    return std::string("{\"pass_id\":1}");
  }
  Result<HoldState> Hold(std::chrono::milliseconds, const HoldRequest&, HoldScope) const override {
    HoldState held;
    held.held = true;
    return held;
  }
  bool Release(const HoldRequest&) const override { return false; }
  HoldState hold_state() const override { return {}; }

  void Block() {
    std::lock_guard<std::mutex> lock(mutex_);
    block_ = true;
  }
  void Unblock() {
    std::lock_guard<std::mutex> lock(mutex_);
    block_ = false;
    changed_.notify_all();
  }
  int forcing() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return forcing_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  mutable int forcing_ = 0;
  bool block_ = false;
};

std::unique_ptr<HttpServer> StartServer(const HttpState& state, HttpServerOptions options = {}) {
  Result<std::unique_ptr<HttpServer>> server =
      HttpServer::Start({"127.0.0.1", 0, true}, state, options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  REQUIRE((*server)->port() > 0);
  return std::move(*server);
}

std::string Url(const HttpServer& server, const std::string& path) {
  return "http://127.0.0.1:" + std::to_string(server.port()) + path;
}

Result<observers::HttpResponse> PostWithToken(const HttpServer& server, const std::string& path,
                                              const std::string& token) {
  observers::HttpCall call;
  call.method = "POST";
  call.url = Url(server, path);
  if (!token.empty()) call.headers = {{"Authorization", "Bearer " + token}};
  return observers::HttpSend(call, kClientTimeout);
}

TEST_CASE("ParseListenAddress reads host and port and knows loopback", "[http]") {
  struct Case {
    std::string text;
    bool ok;
    std::string host;
    int port;
    bool loopback;
  };
  const std::vector<Case> cases = {
      {"127.0.0.1:9464", true, "127.0.0.1", 9464, true},
      {"localhost:80", true, "127.0.0.1", 80, true},
      {"[::1]:9464", true, "::1", 9464, true},
      {"0.0.0.0:9464", true, "0.0.0.0", 9464, false},
      {":9464", true, "0.0.0.0", 9464, false},
      {"10.1.2.3:0", true, "10.1.2.3", 0, false},
      {"[::]:1", true, "::", 1, false},
      {"127.0.0.1", false, "", 0, false},
      {"127.0.0.1:", false, "", 0, false},
      {"127.0.0.1:65536", false, "", 0, false},
      {"127.0.0.1:94x", false, "", 0, false},
      {"::1:9464", false, "", 0, false},
      {"[::1]9464", false, "", 0, false},
      {"example.com:9464", false, "", 0, false},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    Result<ListenAddress> parsed = ParseListenAddress(c.text);
    REQUIRE(parsed.ok() == c.ok);
    if (!c.ok) continue;
    CHECK(parsed->host == c.host);
    CHECK(parsed->port == c.port);
    CHECK(parsed->loopback == c.loopback);
  }
}

TEST_CASE("The server answers GETs and keeps the connection alive", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  Result<observers::HttpResponse> metrics =
      observers::HttpGet(Url(*server, "/metrics"), kClientTimeout);
  REQUIRE(metrics.ok());
  CHECK(metrics->status == 200);
  CHECK(metrics->body == "mesh_reconciler_bus_connected 1\n");

  RawClient client(server->port());
  client.Send(
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string both = client.ReadUntilClosed();
  CHECK(StatusOf(both) == 200);
  CHECK(both.find("HTTP/1.1 404") != std::string::npos);
  CHECK(client.closed());
}

TEST_CASE("HEAD /healthz over the wire: the GET's headers, no body, the connection kept",
          "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  RawClient client(server->port());
  // A body after HEAD's headers would be read as the start of the second answer.
  client.Send(
      "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string both = client.ReadUntilClosed();
  INFO(both);
  CHECK(StatusOf(both) == 200);
  CHECK(both.find("Content-Length: 32\r\n") != std::string::npos);  // the GET's body's
  const size_t second = both.find("\r\n\r\n") + 4;
  CHECK(both.compare(second, 15, "HTTP/1.1 200 OK") == 0);
  CHECK(both.find("mesh_reconciler_bus_connected") == std::string::npos);
}

TEST_CASE("An oversized body gets 413 and oversized headers 431", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  {
    RawClient client(server->port());
    const std::string body(100 * 1024, 'x');
    client.Send("POST /reconcile HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string response = client.ReadUntilClosed();
    CHECK(StatusOf(response) == 413);
    CHECK(client.closed());
  }
  {
    RawClient client(server->port());
    client.Send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: " + std::string(20 * 1024, 'y') +
                "\r\n\r\n");
    CHECK(StatusOf(client.ReadUntilClosed()) == 431);
  }
  CHECK(state.forcing() == 0);
}

TEST_CASE("Garbage bytes get 400 and the server goes on", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  for (const std::string& garbage :
       {std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n", 24),
        std::string("GET /metrics HTTP/9.9\r\n\r\n"), std::string("GET\r\n\r\n"),
        std::string("GET /metrics HTTP/1.1\r\nContent-Length: -1\r\n\r\n"),
        std::string("GET /metrics HTTP/1.1\r\nBad Header Line\r\n\r\n")}) {
    INFO(garbage);
    RawClient client(server->port());
    client.Send(garbage);
    CHECK(StatusOf(client.ReadUntilClosed()) == 400);
    CHECK(client.closed());
  }
  Result<observers::HttpResponse> ok = observers::HttpGet(Url(*server, "/healthz"), kClientTimeout);
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
}

TEST_CASE("A slow client is cut off by the read timeout while others are served", "[http]") {
  BlockingState state;
  HttpServerOptions options;
  options.read_timeout = milliseconds(300);
  auto server = StartServer(state, options);

  RawClient slow(server->port());
  const auto start = std::chrono::steady_clock::now();
  slow.Send("GET /metr");  // and nothing more
  for (int i = 0; i < 5; ++i) {
    Result<observers::HttpResponse> ok =
        observers::HttpGet(Url(*server, "/metrics"), kClientTimeout);
    REQUIRE(ok.ok());
    CHECK(ok->status == 200);
  }
  const std::string answer = slow.ReadUntilClosed();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(slow.closed());
  CHECK(answer.empty());
  CHECK(waited >= milliseconds(250));
  CHECK(waited < kClientTimeout);
}

TEST_CASE("POSTs with a wrong or missing token get 401 over the wire", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  for (const std::string& token :
       {std::string(), std::string("wrong"), std::string(kToken) + "!"}) {
    Result<observers::HttpResponse> reply = PostWithToken(*server, "/reconcile", token);
    REQUIRE(reply.ok());
    CHECK(reply->status == 401);
    CHECK(reply->body == "unauthorized\n");
  }
  CHECK(state.forcing() == 0);
  Result<observers::HttpResponse> ok = PostWithToken(*server, "/reconcile", kToken);
  REQUIRE(ok.ok());
  CHECK(ok->status == 200);
  CHECK(ok->body == "{\"pass_id\":1}");
}

TEST_CASE("A POST /reconcile waiting for its pass does not block other requests", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  state.Block();
  auto waiting =
      std::async(std::launch::async, [&] { return PostWithToken(*server, "/reconcile", kToken); });
  REQUIRE(WaitFor([&] { return state.forcing() == 1; }));
  for (int i = 0; i < 10; ++i) {
    Result<observers::HttpResponse> ok =
        observers::HttpGet(Url(*server, "/readyz"), kClientTimeout);
    REQUIRE(ok.ok());
    CHECK(ok->status == 200);
  }
  state.Unblock();
  Result<observers::HttpResponse> forced = waiting.get();
  REQUIRE(forced.ok());
  CHECK(forced->status == 200);
}

TEST_CASE("At the cap, busy connections are kept and a new one is closed at once", "[http]") {
  BlockingState state;
  HttpServerOptions options;
  options.max_connections = 2;
  auto server = StartServer(state, options);
  state.Block();
  // Two forced passes wait in their handlers: both connections are busy.
  auto first =
      std::async(std::launch::async, [&] { return PostWithToken(*server, "/reconcile", kToken); });
  auto second =
      std::async(std::launch::async, [&] { return PostWithToken(*server, "/reconcile", kToken); });
  REQUIRE(WaitFor([&] { return state.forcing() == 2; }));
  CHECK_FALSE(observers::HttpGet(Url(*server, "/healthz"), milliseconds(500)).ok());
  state.Unblock();
  REQUIRE(first.get().ok());
  REQUIRE(second.get().ok());
  REQUIRE(WaitFor([&] {
    auto probe = observers::HttpGet(Url(*server, "/healthz"), milliseconds(500));
    return probe.ok() && probe->status == 200;
  }));
}

TEST_CASE("At the cap, the connection idle longest makes room for a new one", "[http]") {
  BlockingState state;
  HttpServerOptions options;
  options.max_connections = 3;
  auto server = StartServer(state, options);
  // `oldest` sent nothing; `answered` was answered and waits, kept alive, for another request;
  // `dribbling` is half-way through its request line. All three are idle.
  RawClient oldest(server->port());
  RawClient answered(server->port());
  answered.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  RawClient dribbling(server->port());
  dribbling.Send("GET /metr");
  // Each new probe evicts the idlest: first `oldest`, then the others in their turn; every
  // probe is answered.
  for (int i = 0; i < 3; ++i) {
    Result<observers::HttpResponse> probe =
        observers::HttpGet(Url(*server, "/readyz"), kClientTimeout);
    REQUIRE(probe.ok());
    CHECK(probe->status == 200);
  }
  oldest.ReadUntilClosed();
  CHECK(oldest.closed());
}

TEST_CASE("One address at its cap evicts its own idle connection, not another's", "[http]") {
  BlockingState state;
  HttpServerOptions options;
  options.max_connections_per_client = 2;
  auto server = StartServer(state, options);
  RawClient other(server->port(), std::chrono::seconds(1), "127.0.0.2");
  other.Send("GET /metr");
  RawClient first(server->port());
  RawClient second(server->port());
  second.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  // A third connection from 127.0.0.1 evicts `first` (idle longest of that address).
  Result<observers::HttpResponse> probe =
      observers::HttpGet(Url(*server, "/healthz"), kClientTimeout);
  REQUIRE(probe.ok());
  CHECK(probe->status == 200);
  first.ReadUntilClosed();
  CHECK(first.closed());
  // 127.0.0.2's connection is still open: it finishes its request and is answered.
  other.Send("ics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(StatusOf(other.ReadUntilClosed()) == 200);
}

TEST_CASE("At the cap, the address holding the most connections makes room, not a lone one",
          "[http]") {
  BlockingState state;
  HttpServerOptions options;
  options.max_connections = 4;
  options.header_timeout = std::chrono::seconds(30);  // only an eviction closes a connection
  auto server = StartServer(state, options);
  // `lone` (127.0.0.3) is idle longest: half-way through its request line. 127.0.0.2 then
  // holds three idle connections, and the listener is full.
  RawClient lone(server->port(), std::chrono::seconds(5), "127.0.0.3");
  lone.Send("GET /metr");
  RawClient flood_first(server->port(), std::chrono::seconds(5), "127.0.0.2");
  RawClient flood_second(server->port(), std::chrono::seconds(5), "127.0.0.2");
  RawClient flood_third(server->port(), std::chrono::seconds(5), "127.0.0.2");
  // The probe (127.0.0.1) takes its room from 127.0.0.2, whose oldest connection is closed.
  Result<observers::HttpResponse> probe =
      observers::HttpGet(Url(*server, "/healthz"), kClientTimeout);
  REQUIRE(probe.ok());
  CHECK(probe->status == 200);
  flood_first.ReadUntilClosed();
  CHECK(flood_first.closed());
  // `lone` is still open: it finishes its request and is answered.
  lone.Send("ics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  CHECK(StatusOf(lone.ReadUntilClosed()) == 200);
}

TEST_CASE("Stop closes the listener", "[http]") {
  BlockingState state;
  auto server = StartServer(state);
  const std::string url = Url(*server, "/healthz");
  server->Stop();
  server->Stop();  // idempotent
  CHECK_FALSE(observers::HttpGet(url, milliseconds(500)).ok());
}

TEST_CASE("Stop while clients keep connecting closes the listener without a race", "[http]") {
  // Each accepted connection re-arms the accept from its completion, on whichever I/O thread
  // ran it; Stop's close of the acceptor ran on another I/O thread at the same time, a data race
  // on the acceptor that ThreadSanitizer reported (in https_test, CI of 2026-12-04). A client
  // that connects in a loop keeps accepts completing while Stop runs, round after round.
  BlockingState state;
  for (int round = 0; round < 40; ++round) {
    auto server = StartServer(state);
    const int port = server->port();
    std::atomic<bool> done{false};
    std::atomic<int> connected{0};
    std::thread knocking([&] {
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(port));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      while (!done.load()) {
        const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          connected.fetch_add(1);
        }
        close(fd);
      }
    });
    const bool knocked = WaitFor([&] { return connected.load() >= 10; });
    server->Stop();
    done.store(true);
    knocking.join();
    REQUIRE(knocked);
  }
}

}  // namespace
}  // namespace mesh::reconciler::test
