// Growth: what the reconciler costs as the mesh grows, beside what the server itself takes, each
// size against its own real nats-server (JetStream only: no users file, so no bcrypt), the
// store on tmpfs. For each generated size (Small, Large, 3x and 10x the Large mesh):
//   - first convergence: `reconcile --once` on an empty store, a whole process (start, connect,
//     observe, create everything), its time and peak RSS; beside it the server's creation floor,
//     the same creations pipelined by a bare loop over the connections a large apply uses
//     (PipelinedCreationLoop; the lanes up to 2.11.9, one connection after);
//   - `plan` on the converged bus, a whole process, best of three, and its peak RSS;
//   - the daemon on the converged bus: forced passes (POST /reconcile, the pass's own
//     duration), each followed by the server's observation floor, the bare list loop
//     (BareListLoop, 16 in flight) on a connection of its own; best and median of each; the
//     daemon's RSS converged and its peak (VmHWM) over its life;
//   - with the users file (issue 39 item 3), last, once the daemon is gone: `render-users` of
//     every user's entry into the server's users file at bcrypt cost 4 (a whole process, bound
//     by bcrypt), the server reloaded with it, then `plan --users-file` on the converged bus
//     (best of three): every hash proven by its digest, so one bcrypt (the digest key at the
//     file's cost) and a scan, against `plan` without the file;
//   - per 1,000 objects (streams + consumers), each of the above, and the growth from the
//     smallest size measured.
// Goals at 10x (issue 39): converged pass within 1.3x of the list floor and under 1 s; plan
// under 1.2 s; first convergence within 1.3x of the creation floor; peak RSS at most 64 MiB;
// plan with the users file within 1.5x of plan without it plus one bcrypt (at cost 4 that
// bcrypt is about a millisecond: the check here leaves it out).
//
// Usage: growth_bench [small|large|3x|10x ...]   (default: all four, smallest first)
// MESH_GROWTH_REPEAT: forced passes and list loops per size (default 5). MESH_NATS_SERVER: the
// server binary (tests/support/nats_server.h). MESH_GROWTH_HOLD (set): after each size's passes,
// keeps its converged bus and daemon up, says where on stderr, and goes on when told (for a
// profiler). A plain main() printing a table.

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/support/bench_identity.h"
#include "bench/support/figures.h"
#include "bench/support/floor_loops.h"
#include "bench/support/mesh_gen.h"
#include "model/desired.h"
#include "observers/bus.h"
#include "observers/monitor.h"
#include "observers/server_version.h"
#include "tests/support/daemon_support.h"
#include "tests/support/nats_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using mesh::observers::ApiRequest;
using mesh::observers::BusConnection;
using mesh::observers::Spread;
using mesh::reconciler::test::DaemonProcess;
using mesh::testing::kBenchPassword;
using mesh::testing::kBenchUser;
using mesh::testing::MeshSize;
using mesh::testing::Seconds;
using mesh::testing::WaitFor;

constexpr char kToken[] = "bench-only-admin-token-8d41f0c27a9e35";

[[noreturn]] void Die(const std::string& why) {
  std::fprintf(stderr, "growth_bench: %s\n", why.c_str());
  std::exit(1);
}

// A whole CLI process: its exit code, output, time from spawn to exit, and peak RSS.
struct Measured {
  int exit_code = -1;
  std::string output;
  double seconds = 0;
  double peak_mib = 0;
};

// The peak RSS must be the CLI's own. A child forked from this process starts with this
// process's resident pages, and Linux keeps that mm's high-water mark in the child's ru_maxrss
// through exec: at 10x this process holds the records and their desired state, and plan
// "peaked" at 93 MiB where /usr/bin/time saw 75. So the CLI is started by a fresh copy of this
// program (exec'd first, small), which runs it and reports the CLI's ru_maxrss on its own
// exit status line: `growth_bench --measure-child OUT BINARY ARGS...`.
constexpr char kMeasureChild[] = "--measure-child";

int MeasureChild(char** argv) {
  // argv: [0] program, [1] --measure-child, [2] file for the peak, [3] binary, [4...] args
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    execv(argv[3], argv + 3);
    _exit(127);
  }
  int status = 0;
  rusage usage{};
  if (wait4(pid, &status, 0, &usage) != pid) return 127;
  mesh::testing::WriteFile(argv[2], std::to_string(usage.ru_maxrss));
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string SelfPath() {
  return std::filesystem::read_symlink("/proc/self/exe").string();
}

Measured RunMeasured(const std::vector<std::string>& args) {
  const std::string dir = mesh::testing::MakeTempDir("mesh-growth-cli");
  const std::string log = dir + "/out.log";
  const std::string peak = dir + "/peak";
  std::vector<std::string> wrapped = {kMeasureChild, peak, MESH_BINARY};
  wrapped.insert(wrapped.end(), args.begin(), args.end());
  const auto start = Clock::now();
  const pid_t pid = mesh::reconciler::test::SpawnWithLog(SelfPath(), wrapped, {}, log);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) Die("waitpid failed");
  Measured out;
  out.seconds = Seconds(Clock::now() - start);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  out.output = mesh::testing::ReadFile(log);
  out.peak_mib = std::strtod(mesh::testing::ReadFile(peak).c_str(), nullptr) / 1024.0;
  std::filesystem::remove_all(dir);
  return out;
}

// The server's users file: the bench reconciler alone, a plain password, no permission limits.
std::string UsersConf() {
  return std::string(
             "accounts {\n  MESH {\n    jetstream: enabled\n    users: [\n      { user: \"") +
         kBenchUser + "\", password: \"" + kBenchPassword + "\" }\n    ]\n  }\n}\n";
}

struct Figures {
  std::string name;
  size_t streams = 0;
  size_t consumers = 0;
  double create_floor_s = 0;
  Measured converge;
  Measured plan;          // the best of three
  Measured render_users;  // every user's entry, bcrypt cost 4
  size_t users = 0;       // entries in the users file (the principals with a credential)
  Measured plan_users;    // `plan --users-file`, the best of three
  std::vector<double> pass_s, list_s;
  std::vector<double> list_lanes_s;  // over the lanes too; empty when the server spreads itself
  double daemon_converged_mib = 0, daemon_peak_mib = 0;
  size_t objects() const { return streams + consumers; }
};

std::string Fixed(double v, const char* unit, int digits = 3) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f %s", digits, v, unit);
  return text;
}

std::string Ratio(double value, const char* goal, bool met) {
  char text[96];
  std::snprintf(text, sizeof text, "%.2fx (goal %s: %s)", value, goal, met ? "met" : "MISSED");
  return text;
}

void Row(const std::string& what, const std::string& value, const std::string& notes) {
  std::printf("| %s | %s | %s |\n", what.c_str(), value.c_str(), notes.c_str());
}

// Issue 39 item 3: the users file rendered into the server's (which reloads it), then `plan`
// with it on the converged bus. `cli` runs a measured CLI process with the common flags.
template <typename Cli>
void MeasureUsersFile(Figures& f, mesh::testing::NatsServer& server, Cli& cli,
                      const std::string& records) {
  // render-users takes no bus flags: not through `cli`.
  f.render_users = RunMeasured({"render-users", records, "--out", server.users_file(), "--user",
                                kBenchUser, "--bcrypt-cost", "4"});
  if (f.render_users.exit_code != 0) Die(f.name + ": render-users: " + f.render_users.output);
  const std::string file = mesh::testing::ReadFile(server.users_file());
  for (size_t at = file.find("user: "); at != std::string::npos; at = file.find("user: ", at + 1)) {
    ++f.users;
  }
  // Reloaded with it: `plan` would otherwise report the file as not loaded yet.
  const auto timeout = std::chrono::seconds(5);
  const int64_t loaded_before =
      mesh::observers::ObserveServer(server.monitor_url(), timeout).config_load_time_unix_ns;
  if (kill(server.pid(), SIGHUP) != 0) Die(f.name + ": SIGHUP to the server failed");
  if (!WaitFor(
          [&] {
            return mesh::observers::ObserveServer(server.monitor_url(), timeout)
                       .config_load_time_unix_ns > loaded_before;
          },
          std::chrono::minutes(2))) {
    Die(f.name + ": the server did not reload the rendered users file");
  }
  for (int i = 0; i < 3; ++i) {
    Measured measured = cli({"plan", "--users-file", server.users_file(), "--bcrypt-cost", "4"});
    if (measured.exit_code != 0) {
      Die(f.name + ": plan with the users file on the converged bus: " + measured.output);
    }
    if (i == 0 || measured.seconds < f.plan_users.seconds) f.plan_users = measured;
  }
}

// Every figure of one size, against a server of its own.
Figures Measure(const std::string& name, const MeshSize& size, int repeat) {
  Figures f;
  f.name = name;
  const std::string records_json = mesh::testing::ToJson(mesh::testing::GenerateMesh(size));
  auto desired = mesh::testing::BenchDesired(records_json);
  if (!desired.ok()) Die(desired.status().ToString());
  f.streams = desired->streams.size();
  f.consumers = desired->consumers.size();

  const std::string dir = mesh::testing::MakeTempDir("mesh-growth-bench");
  const std::string records = dir + "/records.json";
  mesh::testing::WriteFile(records, records_json);
  const std::string token = dir + "/admin.token";
  mesh::testing::WriteFile(token, kToken);

  mesh::testing::NatsServerOptions options;
  options.users_conf = UsersConf();
  // 2.15 on allows 1,000 consumers per stream by default; the 10x mesh's DECL holds 20,000.
  options.default_max_consumers = 1'000'000;
  auto server = mesh::testing::NatsServer::Start(options);
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

  // The creation floor on the empty store, over the connections apply would use; the lanes are
  // opened first (untimed), as apply's are by the observation before it.
  const bool in_place = mesh::observers::HandlesApiRequestsInPlace(
      mesh::observers::ParseServerVersion(mesh::testing::ServerBinaryVersion()));
  const Spread spread = in_place ? Spread::kLanes : Spread::kOneConnection;
  auto open_lanes = [&](BusConnection& bus) {
    const std::vector<ApiRequest> warm(64, ApiRequest{"$JS.API.INFO", ""});
    if (spread == Spread::kLanes && !WaitFor([&] {
          bus.RequestMany(warm, Spread::kLanes);
          return bus.lanes_open() > 0;
        })) {
      Die("no lane opened");
    }
  };
  {
    auto bus = connect();
    open_lanes(*bus);
    const auto t0 = Clock::now();
    mesh::testing::PipelinedCreationLoop(*bus, *desired, spread);
    f.create_floor_s = Seconds(Clock::now() - t0);
  }
  wipe();

  const std::vector<std::string> common = {
      "--records",   records,    "--bus",     server->url(),
      "--user",      kBenchUser, "--monitor", server->monitor_url(),
      "--log-level", "warn"};
  auto cli = [&](std::vector<std::string> head) {
    head.insert(head.end(), common.begin(), common.end());
    return RunMeasured(head);
  };
  f.converge = cli({"reconcile", "--once"});
  if (f.converge.exit_code != 0) Die(name + ": reconcile --once: " + f.converge.output);
  for (int i = 0; i < 3; ++i) {
    Measured plan = cli({"plan"});
    if (plan.exit_code != 0) Die(name + ": plan on the converged bus: " + plan.output);
    if (i == 0 || plan.seconds < f.plan.seconds) f.plan = plan;
  }

  std::vector<std::string> daemon_args = common;
  daemon_args.insert(daemon_args.end(), {"--token-file", token, "--interval", "1h"});
  auto daemon = DaemonProcess::Start(daemon_args, {});
  const bool ready = WaitFor(
      [&] {
        auto r = daemon->Get("/readyz");
        return r.ok() && r->status == 200;
      },
      std::chrono::minutes(10));
  if (!ready) Die(name + ": the daemon is not ready; log:\n" + daemon->log());
  auto list_bus = connect();
  open_lanes(*list_bus);
  for (int i = 0; i < repeat; ++i) {
    auto report = daemon->Reconcile(kToken, std::chrono::minutes(5));
    if (!report.ok()) Die(name + ": forced pass: " + report.status().ToString());
    if (!report->converged() || !report->plan.drift.empty()) {
      Die(name + ": the forced pass on the converged bus found drift");
    }
    f.pass_s.push_back(report->duration_seconds);
    const auto t0 = Clock::now();
    mesh::testing::BareListLoop(*list_bus);
    f.list_s.push_back(Seconds(Clock::now() - t0));
    if (in_place) {
      const auto t1 = Clock::now();
      mesh::testing::BareListLoop(*list_bus, Spread::kLanes);
      f.list_lanes_s.push_back(Seconds(Clock::now() - t1));
    }
  }
  f.daemon_converged_mib = mesh::testing::ProcStatusKiB(daemon->pid(), "VmRSS") / 1024;
  f.daemon_peak_mib = mesh::testing::ProcStatusKiB(daemon->pid(), "VmHWM") / 1024;
  if (std::getenv("MESH_GROWTH_HOLD") != nullptr) {
    // For a profiler: the converged bus, its records and the daemon stay up until the file is
    // removed.
    const std::string hold = dir + "/hold";
    mesh::testing::WriteFile(hold, "");
    std::fprintf(stderr,
                 "growth_bench: holding %s: records %s, bus %s, monitor %s, daemon PID %d on %s "
                 "(token %s); rm %s to go on\n",
                 name.c_str(), records.c_str(), server->url().c_str(),
                 server->monitor_url().c_str(), static_cast<int>(daemon->pid()),
                 daemon->url().c_str(), token.c_str(), hold.c_str());
    WaitFor([&] { return !std::filesystem::exists(hold); }, std::chrono::hours(2));
  }
  daemon->Terminate(std::chrono::seconds(30));
  list_bus.reset();
  MeasureUsersFile(f, *server, cli, records);
  server.reset();
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return f;
}

void PrintRows(const Figures& f) {
  const std::string at = f.name + " (" + std::to_string(f.streams) + " streams, " +
                         std::to_string(f.consumers) + " consumers): ";
  const bool goals = f.name == "10x";
  const double pass = mesh::testing::BestOf(f.pass_s), list = mesh::testing::BestOf(f.list_s);
  char best_of[96];
  std::snprintf(best_of, sizeof best_of, "best of %zu; median %.3f s", f.pass_s.size(),
                mesh::testing::MedianOf(f.pass_s));
  Row(at + "converged daemon pass", Fixed(pass, "s"),
      best_of + (goals ? "; " + Ratio(pass / list, "<= 1.3 of the list floor", pass / list <= 1.3) +
                             (pass < 1 ? "; under 1 s: met" : "; under 1 s: MISSED")
                       : ""));
  std::snprintf(best_of, sizeof best_of, "best of %zu; median %.3f s", f.list_s.size(),
                mesh::testing::MedianOf(f.list_s));
  Row(at + "floor: bare list loop, 16 in flight", Fixed(list, "s"), best_of);
  if (!f.list_lanes_s.empty()) {
    const double lanes = mesh::testing::BestOf(f.list_lanes_s);
    std::snprintf(best_of, sizeof best_of, "best of %zu; median %.3f s; the pass takes %.2fx it",
                  f.list_lanes_s.size(), mesh::testing::MedianOf(f.list_lanes_s), pass / lanes);
    Row(at + "floor: the same, consumer lists over the lanes too", Fixed(lanes, "s"), best_of);
  }
  Row(at + "plan, whole process (best of 3)", Fixed(f.plan.seconds, "s"),
      "peak RSS " + Fixed(f.plan.peak_mib, "MiB", 1) +
          (goals ? (f.plan.seconds < 1.2 ? "; goal < 1.2 s: met" : "; goal < 1.2 s: MISSED") : ""));
  const double conv = f.converge.seconds, floor = f.create_floor_s;
  Row(at + "reconcile --once on an empty store, whole process", Fixed(conv, "s"),
      "peak RSS " + Fixed(f.converge.peak_mib, "MiB", 1) + "; " +
          (goals ? Ratio(conv / floor, "<= 1.3 of the creation floor", conv / floor <= 1.3)
                 : Fixed(conv / floor, "x the creation floor", 2)));
  Row(at + "floor: bare pipelined creation", Fixed(floor, "s"), "");
  Row(at + "render-users, " + std::to_string(f.users) + " users at bcrypt cost 4, whole process",
      Fixed(f.render_users.seconds, "s"), "peak RSS " + Fixed(f.render_users.peak_mib, "MiB", 1));
  const double with_file = f.plan_users.seconds / f.plan.seconds;
  Row(at + "plan --users-file, whole process (best of 3)", Fixed(f.plan_users.seconds, "s"),
      "peak RSS " + Fixed(f.plan_users.peak_mib, "MiB", 1) + "; " +
          (goals ? Ratio(with_file, "<= 1.5 of plan without it", with_file <= 1.5)
                 : Fixed(with_file, "x plan without it", 2)));
  const double peak = std::max({f.daemon_peak_mib, f.converge.peak_mib, f.plan.peak_mib});
  Row(at + "daemon RSS converged / peak", Fixed(f.daemon_converged_mib, "MiB", 1),
      "peak " + Fixed(f.daemon_peak_mib, "MiB", 1) +
          (goals
               ? (peak <= 64 ? "; every process <= 64 MiB: met"
                             : "; every process <= 64 MiB: MISSED (" + Fixed(peak, "MiB", 1) + ")")
               : ""));
}

// The growth table: per 1,000 objects, and each time against the Large mesh's (the size the
// earlier goals were set at; the first size measured when Large is not).
void PrintGrowth(const std::vector<Figures>& all) {
  const Figures* base = &all.front();
  for (const Figures& f : all) {
    if (f.name == "Large") base = &f;
  }
  std::printf("\nGrowth: ms per 1,000 objects, and x = the time against %s's (%zu objects)\n",
              base->name.c_str(), base->objects());
  std::printf("%-6s %8s | %-17s %-17s %-17s %-17s %-17s | %9s %9s\n", "size", "objects",
              "converged pass", "list floor", "plan (process)", "first converge", "creation floor",
              "peak MiB", "conv. MiB");
  auto cell = [&](double s, double base_s, size_t objects) {
    char text[32];
    std::snprintf(text, sizeof text, "%7.2f  %6.1fx", s * 1000 / (objects / 1000.0), s / base_s);
    return std::string(text);
  };
  for (const Figures& f : all) {
    std::printf(
        "%-6s %8zu | %-17s %-17s %-17s %-17s %-17s | %9.1f %9.1f\n", f.name.c_str(), f.objects(),
        cell(mesh::testing::BestOf(f.pass_s), mesh::testing::BestOf(base->pass_s), f.objects())
            .c_str(),
        cell(mesh::testing::BestOf(f.list_s), mesh::testing::BestOf(base->list_s), f.objects())
            .c_str(),
        cell(f.plan.seconds, base->plan.seconds, f.objects()).c_str(),
        cell(f.converge.seconds, base->converge.seconds, f.objects()).c_str(),
        cell(f.create_floor_s, base->create_floor_s, f.objects()).c_str(),
        std::max({f.daemon_peak_mib, f.converge.peak_mib, f.plan.peak_mib}),
        f.daemon_converged_mib);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && std::string(argv[1]) == kMeasureChild) return MeasureChild(argv);
  setenv("MESH_RECONCILER_PASSWORD", kBenchPassword, 1);
  const char* chosen = std::getenv("PASS_BENCH_TMPDIR");
  const std::string tmp = chosen != nullptr                           ? chosen
                          : std::filesystem::is_directory("/dev/shm") ? "/dev/shm"
                                                                      : "";
  if (!tmp.empty()) setenv("TMPDIR", tmp.c_str(), 1);
  const char* repeat_text = std::getenv("MESH_GROWTH_REPEAT");
  const int repeat = repeat_text != nullptr ? std::max(1, std::atoi(repeat_text)) : 5;

  const std::map<std::string, MeshSize> known = {{"small", MeshSize::Small()},
                                                 {"large", MeshSize::Large()},
                                                 {"3x", MeshSize::Large().Times(3)},
                                                 {"10x", MeshSize::Large().Times(10)}};
  std::vector<std::string> names;
  for (int i = 1; i < argc; ++i) names.emplace_back(argv[i]);
  if (names.empty()) names = {"small", "large", "3x", "10x"};
  for (const std::string& n : names) {
    if (!known.count(n)) Die("unknown size " + n + " (small, large, 3x, 10x)");
  }

  std::printf("%s; store under %s; %d forced passes per size\n",
              mesh::testing::ServerBinaryVersion().c_str(), tmp.empty() ? "$TMPDIR" : tmp.c_str(),
              repeat);
  std::printf("| measurement | value | notes |\n|---|---|---|\n");
  std::vector<Figures> all;
  for (const std::string& n : names) {
    std::string label = n == "small" ? "Small" : n == "large" ? "Large" : n;
    all.push_back(Measure(label, known.at(n), repeat));
    PrintRows(all.back());
    std::fflush(stdout);
  }
  PrintGrowth(all);
  return 0;
}
