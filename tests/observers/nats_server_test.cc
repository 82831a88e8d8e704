// The test harness itself: a real nats-server on free loopback ports, stopped by PID.
#include "tests/support/nats_server.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <filesystem>

#include "observers/http_client.h"

namespace mesh::testing {
namespace {

constexpr auto kHttpTimeout = std::chrono::seconds(2);

bool PidGone(pid_t pid) {
  return kill(pid, 0) != 0 && errno == ESRCH;
}

bool HealthzOk(const NatsServer& server) {
  auto reply = observers::HttpGet(server.monitor_url() + "/healthz", kHttpTimeout);
  return reply.ok() && reply->status == 200;
}

TEST_CASE("FreePort returns distinct bindable loopback ports", "[observers]") {
  const int a = FreePort();
  const int b = FreePort();
  CHECK(a > 0);
  CHECK(b > 0);
  CHECK(a != b);
  // Below the ephemeral range, where outgoing connections take their ports.
  CHECK(a < 32768);
  CHECK(b < 32768);
}

TEST_CASE("WaitFor returns as soon as the condition holds and false at the deadline",
          "[observers]") {
  int calls = 0;
  CHECK(WaitFor([&] { return ++calls == 3; }));
  CHECK(calls == 3);
  CHECK_FALSE(WaitFor([] { return false; }, std::chrono::milliseconds(30)));
}

TEST_CASE("NatsServer starts, answers, restarts, wipes its store and stops by PID",
          "[observers][integration][server]") {
  auto server = NatsServer::Start({});
  REQUIRE(server->running());
  const pid_t first_pid = server->pid();
  const int port = server->port();
  const std::string dir = server->dir();

  // The main config is the chart's layout: it includes users.conf and defines no account.
  const std::string conf = ReadFile(server->main_config());
  CHECK(conf.find("include \"users.conf\"") != std::string::npos);
  CHECK(conf.find("accounts") == std::string::npos);
  CHECK(ReadFile(server->users_file()).find("MESH") != std::string::npos);
  CHECK(std::stoi(ReadFile(server->pid_file())) == first_pid);
  CHECK(HealthzOk(*server));
  auto varz = observers::HttpGet(server->monitor_url() + "/varz", kHttpTimeout);
  REQUIRE(varz.ok());
  CHECK(varz->body.find("\"server_name\": \"n" + std::to_string(port) + "\"") != std::string::npos);

  // JetStream wrote its store; Restart keeps folder and ports.
  REQUIRE(WaitFor([&] { return std::filesystem::exists(server->store_dir()); }));
  server->Restart();
  CHECK(server->running());
  CHECK(server->pid() != first_pid);
  CHECK(PidGone(first_pid));
  CHECK(server->port() == port);
  CHECK(server->dir() == dir);
  CHECK(HealthzOk(*server));

  server->Stop();
  CHECK_FALSE(server->running());
  server->WipeStore();
  CHECK_FALSE(std::filesystem::exists(server->store_dir()));
  server->Restart();  // from stopped: starts again
  const pid_t last_pid = server->pid();
  CHECK(HealthzOk(*server));

  server->Stop();
  CHECK(PidGone(last_pid));
  CHECK_FALSE(HealthzOk(*server));
  server.reset();
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("NatsServer Kill leaves no process behind", "[observers][integration][server]") {
  auto server = NatsServer::Start({});
  const pid_t pid = server->pid();
  server->Kill();
  CHECK_FALSE(server->running());
  CHECK(PidGone(pid));
}

TEST_CASE("A server dies with a test process that aborts without cleaning up",
          "[observers][integration][server]") {
  // The orphaned server is re-parented to this process, which can then reap it.
  REQUIRE(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t test_process = fork();
  REQUIRE(test_process >= 0);
  if (test_process == 0) {  // a test that starts a server and then aborts: no destructor runs
    close(fds[0]);
    auto server = NatsServer::Start({});
    const pid_t pid = server->pid();
    if (write(fds[1], &pid, sizeof pid) != sizeof pid) _exit(3);
    // Its folder, for this test to remove: no destructor will.
    const std::string dir = server->dir();
    if (write(fds[1], dir.data(), dir.size()) != static_cast<ssize_t>(dir.size())) _exit(3);
    // SIGKILL, not abort(): Catch2's inherited SIGABRT handler would run (and, under TSan, be
    // reported and turn the death into an exit).
    kill(getpid(), SIGKILL);
    _exit(4);  // not reached
  }
  close(fds[1]);
  pid_t server_pid = 0;
  const bool told = read(fds[0], &server_pid, sizeof server_pid) == sizeof server_pid;
  std::string server_dir;
  char chunk[256];
  for (ssize_t n; (n = read(fds[0], chunk, sizeof chunk)) > 0;) server_dir.append(chunk, n);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(test_process, &status, 0) == test_process);
  REQUIRE(told);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  const bool died = WaitFor([&] { return waitpid(server_pid, nullptr, WNOHANG) == server_pid; },
                            std::chrono::seconds(10));
  CHECK(died);
  if (!died) {  // never leave it behind, even when the test fails
    kill(server_pid, SIGKILL);
    waitpid(server_pid, nullptr, 0);
  }
  if (!server_dir.empty()) std::filesystem::remove_all(server_dir);
}

TEST_CASE("NatsServer with a bad users.conf fails to start with the log tail",
          "[observers][integration][server]") {
  NatsServerOptions options;
  options.users_conf = "accounts { MESH { users: [ { user: \n";
  try {
    NatsServer::Start(options);
    FAIL("started with a broken configuration");
  } catch (const std::runtime_error& e) {
    const std::string message = e.what();
    CHECK(message.find("exited during start") != std::string::npos);
    CHECK(message.find("users.conf") != std::string::npos);
    // The folder is kept for a post-mortem and named in the message; this failure is expected.
    const size_t begin = message.find("(dir ");
    REQUIRE(begin != std::string::npos);
    const std::string dir = message.substr(begin + 5, message.find(')', begin) - begin - 5);
    CHECK(std::filesystem::exists(dir + "/nats.log"));
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("NatsServer forms a three-node JetStream cluster", "[observers][integration][server]") {
  const int cluster_ports[3] = {FreePort(), FreePort(), FreePort()};
  std::vector<std::unique_ptr<NatsServer>> servers;
  for (int i = 0; i < 3; ++i) {
    NatsServerOptions options;
    options.cluster_port = cluster_ports[i];
    for (int j = 0; j < 3; ++j) {
      if (j != i) options.route_ports.push_back(cluster_ports[j]);
    }
    options.wait_healthy = false;  // a member is healthy only once the meta group has a leader
    servers.push_back(NatsServer::Start(options));
  }
  for (const auto& server : servers) {
    CHECK(WaitFor([&] { return HealthzOk(*server); }, std::chrono::seconds(30)));
  }
}

}  // namespace
}  // namespace mesh::testing
