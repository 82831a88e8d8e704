// The listener under a flood, measured on the real daemon binary against a real nats-server
// (the example mesh): 300 idle clients (connect, send nothing) and 200 slow ones (one byte of a
// request every 100 ms, never the last), reopened as soon as the daemon closes them, while a
// kubelet-like prober asks /healthz and /readyz every 100 ms with a 1 s timeout (the kubelet's
// default; the chart allows 5 s) and a Prometheus-like scraper GETs /metrics every second.
//
//   1. the same probes on a quiet listener (the baseline);
//   2. the flood from one address (127.0.0.2): the per-client cap of 64;
//   3. the flood from 20 addresses (127.0.0.2 to .21, 25 connections each): no address at its
//      cap, twice the listener's cap of 256 together.
//
// Goal: every probe and scrape answered 200. A plain main() printing a table.
// Usage: http_load_bench [seconds per flood]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "bench/support/bench_identity.h"
#include "tests/support/daemon_support.h"
#include "tests/support/flood.h"
#include "tests/support/nats_server.h"

namespace {

using mesh::reconciler::test::DaemonProcess;
using mesh::testing::Flood;
using mesh::testing::WaitFor;
using Clock = std::chrono::steady_clock;

constexpr char kToken[] = "bench-only-admin-token-5b1e9c7d03a2";

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "http_load_bench: %s\n", why.c_str());
  std::exit(1);
}

void Row(const std::string& what, const std::string& value, const std::string& goal) {
  std::printf("| %-58s | %14s | %-12s |\n", what.c_str(), value.c_str(), goal.c_str());
}

std::string Fixed(double v, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
  return buf;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return -1;
  std::sort(values.begin(), values.end());
  const size_t index = std::min(
      values.size() - 1, static_cast<size_t>(p / 100.0 * static_cast<double>(values.size())));
  return values[index];
}

struct Probed {
  int asked = 0;
  int answered = 0;            // 200 within the timeout
  std::vector<double> millis;  // of the answered ones
  std::string last_failure;
};

// GETs `path` every `period` until `stop`, each with `timeout`.
Probed Probe(const DaemonProcess& daemon, const std::vector<std::string>& paths,
             std::chrono::milliseconds period, std::chrono::milliseconds timeout,
             const std::atomic<bool>& stop) {
  Probed out;
  while (!stop) {
    const std::string& path = paths[static_cast<size_t>(out.asked) % paths.size()];
    const auto start = Clock::now();
    auto reply = daemon.Get(path, timeout);
    ++out.asked;
    if (reply.ok() && reply->status == 200) {
      ++out.answered;
      out.millis.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    } else {
      out.last_failure =
          path + ": " + (reply.ok() ? std::to_string(reply->status) : reply.status().ToString());
    }
    std::this_thread::sleep_until(start + period);
  }
  return out;
}

// Probes and scrapes for `duration`; `what` names the rows.
void Measure(const DaemonProcess& daemon, const std::string& what, std::chrono::seconds duration,
             const Flood* flood) {
  std::atomic<bool> stop{false};
  Probed probes;
  Probed scrapes;
  std::thread prober([&] {
    probes = Probe(daemon, {"/healthz", "/readyz"}, std::chrono::milliseconds(100),
                   std::chrono::seconds(1), stop);
  });
  std::thread scraper([&] {
    scrapes = Probe(daemon, {"/metrics"}, std::chrono::seconds(1), std::chrono::seconds(10), stop);
  });
  const int reopened_before = flood ? flood->reopened() : 0;
  std::this_thread::sleep_for(duration);  // the measurement window, not a synchronisation
  stop = true;
  prober.join();
  scraper.join();
  Row(what + ": probes answered 200 within 1 s",
      std::to_string(probes.answered) + " / " + std::to_string(probes.asked), "all");
  Row(what + ": probe p50", Fixed(Percentile(probes.millis, 50), "ms"), "");
  Row(what + ": probe p99", Fixed(Percentile(probes.millis, 99), "ms"), "");
  Row(what + ": probe max",
      Fixed(probes.millis.empty() ? -1
                                  : *std::max_element(probes.millis.begin(), probes.millis.end()),
            "ms"),
      "< 1000 ms");
  Row(what + ": /metrics scrapes answered 200",
      std::to_string(scrapes.answered) + " / " + std::to_string(scrapes.asked), "all");
  if (flood) {
    Row(what + ": flood connections closed by the daemon",
        std::to_string(flood->reopened() - reopened_before), "");
  }
  if (!probes.last_failure.empty())
    std::printf("%s: last failed probe: %s\n", what.c_str(), probes.last_failure.c_str());
  if (!scrapes.last_failure.empty())
    std::printf("%s: last failed scrape: %s\n", what.c_str(), scrapes.last_failure.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const std::chrono::seconds duration(argc > 1 ? std::atoi(argv[1]) : 20);
  std::printf("| %-58s | %14s | %-12s |\n", "measure", "value", "goal");
  std::printf("|%s|%s|%s|\n", std::string(60, '-').c_str(), std::string(16, '-').c_str(),
              std::string(14, '-').c_str());

  const std::string dir = mesh::testing::MakeTempDir("mesh-http-load");
  const std::string records_json =
      mesh::testing::ReadFile(std::string(MESH_SOURCE_DIR) + "/examples/records.json");
  const std::string records_path = dir + "/records.json";
  const std::string token_path = dir + "/admin.token";
  mesh::testing::WriteFile(records_path, records_json);
  mesh::testing::WriteFile(token_path, kToken);
  auto desired = mesh::testing::BenchDesired(records_json);
  if (!desired.ok()) Die(desired.status().ToString());
  auto users_conf = mesh::testing::BenchUsersConf(*desired);
  if (!users_conf.ok()) Die(users_conf.status().ToString());
  mesh::testing::NatsServerOptions server_options;
  server_options.users_conf = *users_conf;
  auto server = mesh::testing::NatsServer::Start(server_options);
  auto daemon = DaemonProcess::Start(
      {"--records",     records_path,
       "--bus",         server->url(),
       "--user",        mesh::testing::kBenchUser,
       "--users-file",  server->users_file(),
       "--pid-file",    server->pid_file(),
       "--monitor",     server->monitor_url(),
       "--bcrypt-cost", std::to_string(mesh::testing::kBenchCost),
       "--token-file",  token_path,
       "--interval",    "10s",
       "--log-level",   "warn"},
      {std::string("MESH_RECONCILER_PASSWORD=") + mesh::testing::kBenchPassword});
  const bool ready = WaitFor(
      [&] {
        auto readyz = daemon->Get("/readyz", std::chrono::seconds(1));
        return readyz.ok() && readyz->status == 200;
      },
      std::chrono::seconds(60));
  if (!ready) Die("the daemon did not become ready; log:\n" + daemon->log());

  Measure(*daemon, "quiet listener", duration, nullptr);
  {
    Flood flood(daemon->port(), 300, 200, 1);
    if (!WaitFor([&] { return flood.reopened() >= 500; }, std::chrono::seconds(30))) {
      Die("the flood did not open its connections");
    }
    Measure(*daemon, "flood from 1 address", duration, &flood);
  }
  {
    Flood flood(daemon->port(), 300, 200, 20);
    if (!WaitFor([&] { return flood.reopened() >= 500; }, std::chrono::seconds(30))) {
      Die("the flood did not open its connections");
    }
    Measure(*daemon, "flood from 20 addresses", duration, &flood);
  }
  daemon->Terminate(std::chrono::seconds(15));
  server.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
