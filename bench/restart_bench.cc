// Whole processes at the DEFAULT bcrypt cost (10), on the Large generated mesh with every
// password plain (2,302 principals), against a real nats-server, each beside the naive
// per-object loop in the same run:
//   1. the first render of every password (`render-users --out`, no file yet): its time, on all
//      cores; and render-users again on the file it wrote (the next pod's init container);
//   2. `plan` on a converged bus (start, credentials, connect, observe) beside one INFO request
//      per object, in turn (goal: plan at least 3x faster);
//   3. `reconcile --once` after a store wipe beside a sequential creation loop after another
//      wipe (goal: at least 2x faster), and beside the server's floor: the same creations
//      pipelined by a bare loop (PipelinedCreationLoop), on one connection and over the lanes
//      a large apply uses (observers::Spread::kLanes);
//   4. the daemon restarted on a converged bus: ready (first pass finished, /readyz 200)
//      within 1 s of its start;
//   5. the daemon restarted on an empty store: every stream and consumer back within 3 s; and
//      the same with a users file without digests (as an older version wrote it, so that every
//      password is hashed again in the background): streams first, the users file when
//      hashing ends.
// A plain main() printing a table. Usage: restart_bench

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "bench/support/bench_identity.h"
#include "bench/support/figures.h"
#include "bench/support/floor_loops.h"
#include "bench/support/mesh_gen.h"
#include "model/desired.h"
#include "observers/bus.h"
#include "observers/server_version.h"
#include "reconciler/pass/pass.h"
#include "tests/support/daemon_support.h"
#include "tests/support/nats_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using mesh::observers::ApiRequest;
using mesh::observers::BusConnection;
using mesh::reconciler::test::CliResult;
using mesh::reconciler::test::DaemonProcess;
using mesh::reconciler::test::RunCli;
using mesh::testing::kBenchPassword;
using mesh::testing::kBenchUser;
using mesh::testing::Seconds;
using mesh::testing::WaitFor;

constexpr int kCost = 10;  // bcrypt's default, what production runs
constexpr char kToken[] = "bench-only-admin-token-5c2e9a7f1b3d40";

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "restart_bench: %s\n", why.c_str());
  std::exit(1);
}

void Row(const std::string& what, double seconds, const std::string& goal) {
  std::printf("| %s | %.3f s | %s |\n", what.c_str(), seconds, goal.c_str());
}

std::string Ratio(double value, const char* goal, bool met) {
  char text[96];
  std::snprintf(text, sizeof text, "%.1fx (goal %s: %s)", value, goal, met ? "met" : "MISSED");
  return text;
}

// The machine's 1-minute load average now, as a note: what else ran beside a measurement.
std::string LoadNote() {
  const std::string loadavg = mesh::testing::ReadFile("/proc/loadavg");
  const std::string first = loadavg.substr(0, loadavg.find(' '));
  return "load average " + (first.empty() ? std::string("unknown") : first) + " at its start";
}

std::string Within(double seconds, double goal) {
  char text[64];
  std::snprintf(text, sizeof text, "goal <= %.0f s: %s", goal, seconds <= goal ? "met" : "MISSED");
  return text;
}

void RequireOk(const ApiRequest& request, const mesh::observers::ApiReply& reply) {
  if (!reply.status.ok()) Die(request.subject + ": " + reply.status.ToString());
}

// The naive peer: one INFO request per desired object, each waiting for its answer.
void PerObjectInfoLoop(BusConnection& bus, const mesh::model::DesiredState& desired) {
  for (const auto& s : desired.streams) {
    ApiRequest r{"$JS.API.STREAM.INFO." + s.name.str(), ""};
    RequireOk(r, bus.Request(r));
  }
  for (const auto& c : desired.consumers) {
    ApiRequest r{"$JS.API.CONSUMER.INFO." + c.stream.str() + "." + c.durable.str(), ""};
    RequireOk(r, bus.Request(r));
  }
}

// The naive peer after a wipe: creates every stream, then every consumer, one at a time.
void SequentialCreationLoop(BusConnection& bus, const mesh::model::DesiredState& desired) {
  const mesh::testing::Creations creations = mesh::testing::CreationsFor(desired);
  for (const auto* batch : {&creations.streams, &creations.consumers}) {
    for (const ApiRequest& r : *batch) RequireOk(r, bus.Request(r));
  }
}

std::string Hashed(const std::string& output) {
  std::smatch m;
  if (std::regex_search(output, m, std::regex("note: ([0-9]+) password\\(s\\) hashed"))) {
    return m[1];
  }
  std::smatch j;
  if (std::regex_search(output, j, std::regex("\"passwords_hashed\": *([0-9]+)"))) return j[1];
  return "?";
}

}  // namespace

int main() {
  setenv("MESH_RECONCILER_PASSWORD", kBenchPassword, 1);
  const char* chosen = std::getenv("PASS_BENCH_TMPDIR");
  const std::string tmp = chosen != nullptr                           ? chosen
                          : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                      : "";
  if (!tmp.empty()) setenv("TMPDIR", tmp.c_str(), 1);

  const std::string records_json = mesh::testing::ToJson(mesh::testing::GenerateMesh(
      mesh::testing::MeshSize::Large().WithCredentials(mesh::testing::CredentialMix::kPlain)));
  auto desired = mesh::testing::BenchDesired(records_json);
  if (!desired.ok()) Die(desired.status().ToString());
  size_t plain = 0;
  for (const auto& p : desired->principals) {
    plain += p.credential.kind == mesh::model::Credential::Kind::kPlain ? 1 : 0;
  }
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf(
      "Large mesh, every password plain: %zu streams, %zu consumers, %zu plain passwords; "
      "bcrypt cost %d; %u cores; %s\n",
      desired->streams.size(), desired->consumers.size(), plain, kCost, cores,
      mesh::testing::ServerBinaryVersion().c_str());

  const std::string dir = mesh::testing::MakeTempDir("mesh-restart-bench");
  const std::string records = dir + "/records.json";
  const std::string first_file = dir + "/users.conf";
  mesh::testing::WriteFile(records, records_json);
  const std::string cost = std::to_string(kCost);
  std::printf("| measurement | value | goal / notes |\n|---|---|---|\n");

  // 1. The first render, then the next init container on the file it finds.
  const std::string first_render_load = LoadNote();
  auto start = Clock::now();
  CliResult first = RunCli(
      {"render-users", records, "--out", first_file, "--user", kBenchUser, "--bcrypt-cost", cost},
      std::chrono::minutes(30));
  const double first_render = Seconds(Clock::now() - start);
  if (first.exit_code != 0) Die("render-users: " + first.output);
  Row("render-users, first render (" + Hashed(first.output) + " passwords hashed, " +
          std::to_string(cores) + " cores)",
      first_render, first_render_load);

  mesh::testing::NatsServerOptions options;
  options.users_conf = mesh::testing::ReadFile(first_file);
  auto server = mesh::testing::NatsServer::Start(options);
  const std::string users = server->users_file();
  start = Clock::now();
  CliResult again = RunCli(
      {"render-users", records, "--out", users, "--user", kBenchUser, "--bcrypt-cost", cost});
  const double second_render = Seconds(Clock::now() - start);
  if (again.exit_code != 0) Die("render-users again: " + again.output);
  Row("render-users on its own file (" + Hashed(again.output) + " hashed)", second_render,
      Ratio(first_render / second_render, "-", true) + " faster than the first");

  const std::vector<std::string> pass = {"--records",     records,
                                         "--bus",         server->url(),
                                         "--user",        kBenchUser,
                                         "--users-file",  users,
                                         "--pid-file",    server->pid_file(),
                                         "--monitor",     server->monitor_url(),
                                         "--bcrypt-cost", cost,
                                         "--log-level",   "warn",
                                         "--json"};
  auto cli = [&](std::vector<std::string> head) {
    head.insert(head.end(), pass.begin(), pass.end());
    const auto t0 = Clock::now();
    CliResult r = RunCli(head, std::chrono::minutes(30));
    return std::make_pair(r, Seconds(Clock::now() - t0));
  };
  auto connect = [&] {
    auto bus = BusConnection::Connect(mesh::testing::BenchBusSettings(server->url()));
    if (!bus.ok()) Die(bus.status().ToString());
    return std::move(*bus);
  };
  auto wipe = [&] {
    server->Stop();
    server->WipeStore();
    server->Restart();
  };

  // 3 before 2: the first reconcile --once converges the fresh bus.
  auto [recovery, recovery_s] = cli({"reconcile", "--once"});
  if (recovery.exit_code != 0) Die("reconcile --once: " + recovery.output);
  Row("reconcile --once on an empty store (" + Hashed(recovery.output) + " hashed)", recovery_s,
      "whole process");

  // 2. plan on the converged bus, beside one info request per object.
  auto [plan, plan_s] = cli({"plan"});
  if (plan.exit_code != 0) Die("plan on a converged bus: " + plan.output);
  {
    auto bus = connect();
    const auto t0 = Clock::now();
    PerObjectInfoLoop(*bus, *desired);
    const double info_s = Seconds(Clock::now() - t0);
    Row("plan on a converged bus (" + Hashed(plan.output) + " hashed)", plan_s, "whole process");
    Row("naive: one INFO request per object, sequential", info_s,
        Ratio(info_s / plan_s, ">= 3", info_s / plan_s >= 3));
  }

  // 3. reconcile --once after a store wipe, beside sequential creation after another wipe.
  wipe();
  auto [rewipe, rewipe_s] = cli({"reconcile", "--once"});
  if (rewipe.exit_code != 0) Die("reconcile --once after a wipe: " + rewipe.output);
  // A bare loop on an empty store, timed from its first request (connected before), sending
  // with `spread`. For Spread::kLanes the lanes are opened first (a few spread batches of INFO
  // requests), untimed.
  using mesh::observers::Spread;
  auto after_wipe = [&](const std::function<void(BusConnection&, Spread)>& loop, Spread spread) {
    wipe();
    auto bus = connect();
    const std::vector<ApiRequest> warm(64, ApiRequest{"$JS.API.INFO", ""});
    if (spread == Spread::kLanes && !WaitFor([&] {
          bus->RequestMany(warm, Spread::kLanes);
          return bus->lanes_open() > 0;
        })) {
      Die("no lane opened");
    }
    const auto t0 = Clock::now();
    loop(*bus, spread);
    return Seconds(Clock::now() - t0);
  };
  const double sequential_s =
      after_wipe([&](BusConnection& bus, Spread) { SequentialCreationLoop(bus, *desired); },
                 Spread::kOneConnection);
  auto pipelined = [&](BusConnection& bus, Spread spread) {
    mesh::testing::PipelinedCreationLoop(bus, *desired, spread);
  };
  const double floor_s = after_wipe(pipelined, Spread::kOneConnection);
  const bool in_place = mesh::observers::HandlesApiRequestsInPlace(
      mesh::observers::ParseServerVersion(mesh::testing::ServerBinaryVersion()));
  const double lanes_floor_s = in_place ? after_wipe(pipelined, Spread::kLanes) : floor_s;
  Row("reconcile --once after a store wipe (" + Hashed(rewipe.output) + " hashed)", rewipe_s,
      "whole process");
  Row("naive: sequential creation after a wipe", sequential_s,
      Ratio(sequential_s / rewipe_s, ">= 2", sequential_s / rewipe_s >= 2));
  {
    char note[160];
    std::snprintf(note, sizeof note,
                  "the server's floor on one connection: reconcile --once takes %.2fx it; "
                  "sequential/floor %.2fx bounds the ratio above",
                  rewipe_s / floor_s, sequential_s / floor_s);
    Row("floor: the same creations, 16 in flight, bare loop (no process)", floor_s, note);
    std::snprintf(note, sizeof note,
                  in_place ? "what the server does with its cores: reconcile --once takes %.2fx it"
                           : "2.11.10 on: the server spreads one connection itself (%.2fx)",
                  rewipe_s / lanes_floor_s);
    Row("floor over the lanes: the same, 16 in flight on each of 4 connections", lanes_floor_s,
        note);
  }

  // 4 and 5: the daemon, started by PID and stopped by PID.
  const std::string token = dir + "/admin.token";
  mesh::testing::WriteFile(token, kToken);
  std::vector<std::string> daemon_args = {"--records",     records,
                                          "--bus",         server->url(),
                                          "--user",        kBenchUser,
                                          "--users-file",  users,
                                          "--pid-file",    server->pid_file(),
                                          "--monitor",     server->monitor_url(),
                                          "--bcrypt-cost", cost,
                                          "--token-file",  token,
                                          "--interval",    "1h",
                                          "--log-level",   "info"};
  auto ready = [](DaemonProcess& d) {
    return WaitFor(
        [&] {
          auto r = d.Get("/readyz");
          return r.ok() && r->status == 200;
        },
        std::chrono::minutes(10));
  };
  // When the server itself holds every desired stream and consumer (its /jsz counts): the
  // moment the mesh is back, before the pass re-observes everything and finishes.
  auto all_on_server = [&] {
    const std::optional<mesh::testing::Jsz> jsz = mesh::testing::JszOf(*server);
    return jsz && jsz->streams >= static_cast<int64_t>(desired->streams.size()) &&
           jsz->consumers >= static_cast<int64_t>(desired->consumers.size());
  };
  auto missing = [](DaemonProcess& d, const char* kind) {
    return d
        .Metric(std::string("mesh_reconciler_drift_objects{kind=\"") + kind +
                "\",state=\"missing\"}")
        .value_or(-1);
  };
  {
    const auto t0 = Clock::now();
    auto daemon = DaemonProcess::Start(daemon_args, {});
    if (!ready(*daemon)) Die("daemon not ready; log:\n" + daemon->log());
    const double ready_s = Seconds(Clock::now() - t0);
    Row("daemon restarted on a converged bus: ready (first pass finished)", ready_s,
        Within(ready_s, 1));
    daemon->Terminate(std::chrono::seconds(10));
  }
  {
    wipe();
    const auto t0 = Clock::now();
    auto daemon = DaemonProcess::Start(daemon_args, {});
    if (!WaitFor(all_on_server, std::chrono::minutes(10))) Die("objects not back");
    const double back_s = Seconds(Clock::now() - t0);
    if (!ready(*daemon)) Die("daemon not ready; log:\n" + daemon->log());
    const double ready_s = Seconds(Clock::now() - t0);
    if (missing(*daemon, "stream") != 0 || missing(*daemon, "consumer") != 0) {
      Die("streams or consumers still missing after the first pass; log:\n" + daemon->log());
    }
    Row("daemon restarted on an empty store: every stream and consumer back (server's /jsz)",
        back_s, Within(back_s, 3));
    Row("  ... its first pass finished (re-observed, ready)", ready_s, "whole pass");
    daemon->Terminate(std::chrono::seconds(10));
  }
  {
    // An empty store and a users file without digests: every password hashed again.
    wipe();
    std::string file = mesh::testing::ReadFile(users);
    file = std::regex_replace(file, std::regex(" *# credential digest: [^\\n]*\\n"), "");
    mesh::testing::WriteFile(users, file);
    server->Restart();  // loads the digest-free file (the same hashes)
    const std::string load = LoadNote();
    const auto t0 = Clock::now();
    auto daemon = DaemonProcess::Start(daemon_args, {});
    if (!WaitFor(all_on_server, std::chrono::minutes(10))) Die("objects not back");
    const double back_s = Seconds(Clock::now() - t0);
    if (!ready(*daemon)) Die("daemon not ready; log:\n" + daemon->log());
    if (missing(*daemon, "stream") != 0 || missing(*daemon, "consumer") != 0) {
      Die("streams or consumers still missing after the first pass; log:\n" + daemon->log());
    }
    const bool hashed = WaitFor(
        [&] {
          return daemon->Metric("mesh_reconciler_credentials_pending").value_or(-1) == 0 &&
                 daemon->log().find("hashing finished") != std::string::npos;
        },
        std::chrono::minutes(30));
    const double hashed_s = Seconds(Clock::now() - t0);
    if (!hashed) Die("hashing did not finish; log:\n" + daemon->log());
    const bool written = WaitFor(
        [&] {
          return mesh::testing::ReadFile(users).find("# credential digest:") != std::string::npos;
        },
        std::chrono::minutes(1));
    const double written_s = Seconds(Clock::now() - t0);
    if (!written) Die("the users file was not rewritten; log:\n" + daemon->log());
    Row("empty store, users file without digests: every stream and consumer back (/jsz)", back_s,
        Within(back_s, 3));
    Row("  ... every password hashed again in the background (" + std::to_string(cores) + " cores)",
        hashed_s, load);
    Row("  ... the users file written with every digest", written_s, "after hashing ends");
    daemon->Terminate(std::chrono::seconds(10));
  }
  server.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return 0;
}
