// The daemon (`mesh-reconciler run`, the real binary) as a child process for the integration
// tests and the benchmark: started with its stderr in a log file, talked to over HTTP, stopped
// by PID (SIGTERM, then SIGKILL after a deadline). Also small helpers to read a metric and to
// run the on-call CLI.
//
// Header-only (the test glob compiles only *_test.cc; the benchmark includes it too). Errors
// throw std::runtime_error, so that it works without Catch. Thread-safety: one thread drives a
// DaemonProcess; the HTTP helpers may be called from any thread.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"
#include "observers/http_client.h"
#include "reconciler/pass/pass.h"
#include "tests/support/nats_server.h"

namespace mesh::reconciler::test {

inline constexpr auto kDaemonHttpTimeout = std::chrono::seconds(10);

// Runs `binary args...` with `env` added to this process's environment (an entry replaces an
// inherited variable of the same name); stdout and stderr go to `log_path`. Returns the
// child's PID.
inline pid_t SpawnWithLog(const std::string& binary, const std::vector<std::string>& args,
                          const std::vector<std::string>& env, const std::string& log_path) {
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  auto replaced = [&env](std::string_view inherited) {
    const size_t equals = inherited.find('=');
    if (equals == std::string_view::npos) return false;
    const std::string_view name = inherited.substr(0, equals + 1);  // "NAME="
    return std::any_of(env.begin(), env.end(),
                       [&](const std::string& entry) { return entry.rfind(name, 0) == 0; });
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!replaced(*e)) env_storage.emplace_back(*e);
  }
  env_storage.insert(env_storage.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // Dies with the test process even when that one aborts without running destructors.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int out = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
    close_range(3, ~0U, 0);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  return child;
}

// Waits for `pid` to exit within `deadline`; its exit status (or 128 + signal), nullopt when
// it is still running.
inline std::optional<int> WaitExit(pid_t pid, std::chrono::milliseconds deadline) {
  std::optional<int> code;
  mesh::testing::WaitFor(
      [&] {
        int status = 0;
        const pid_t r = waitpid(pid, &status, WNOHANG);
        if (r != pid) return false;
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return true;
      },
      deadline);
  return code;
}

// Runs the CLI to completion: its exit code and everything it printed.
struct CliResult {
  int exit_code = -1;
  std::string output;
};
inline CliResult RunCli(const std::vector<std::string>& args,
                        std::chrono::milliseconds deadline = std::chrono::seconds(90)) {
  const std::string dir = mesh::testing::MakeTempDir("mesh-cli");
  const std::string log = dir + "/out.txt";
  const pid_t pid = SpawnWithLog(MESH_BINARY, args, {}, log);
  std::optional<int> code = WaitExit(pid, deadline);
  if (!code) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  CliResult result{code.value_or(-1), mesh::testing::ReadFile(log)};
  std::filesystem::remove_all(dir);
  return result;
}

// Runs `promtool check metrics` on `text`: its exit code and what it printed.
inline CliResult Promtool(const std::string& text) {
  const std::string dir = mesh::testing::MakeTempDir("mesh-promtool");
  const std::string input = dir + "/metrics.txt";
  const std::string output = dir + "/out.txt";
  mesh::testing::WriteFile(input, text);
  const std::string command = "promtool check metrics < '" + input + "' > '" + output + "' 2>&1";
  const int status = std::system(command.c_str());
  CliResult result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, mesh::testing::ReadFile(output)};
  std::filesystem::remove_all(dir);
  return result;
}

// The value of the first sample whose series (name and labels, as printed) is `series`.
inline std::optional<double> MetricValue(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::strtod(line.c_str() + series.size() + 1, nullptr);
    }
  }
  return std::nullopt;
}

class DaemonProcess {
 public:
  // Starts `mesh-reconciler run <args> --listen 127.0.0.1:<free port>` and waits until
  // /healthz answers 200. `env` entries are "NAME=value". A non-empty `ca_file`: the daemon
  // serves HTTPS (its args carry --tls-cert/--tls-key) with a certificate from that CA.
  static std::unique_ptr<DaemonProcess> Start(const std::vector<std::string>& args,
                                              const std::vector<std::string>& env,
                                              const std::string& ca_file = "") {
    std::unique_ptr<DaemonProcess> daemon(new DaemonProcess());
    daemon->ca_file_ = ca_file;
    daemon->dir_ = mesh::testing::MakeTempDir("mesh-daemon");
    daemon->port_ = mesh::testing::FreePort();
    std::vector<std::string> all = {"run"};
    all.insert(all.end(), args.begin(), args.end());
    all.push_back("--listen");
    all.push_back("127.0.0.1:" + std::to_string(daemon->port_));
    daemon->pid_ = SpawnWithLog(MESH_BINARY, all, env, daemon->log_path());
    bool exited = false;
    const bool up = mesh::testing::WaitFor([&] {
      int status = 0;
      if (waitpid(daemon->pid_, &status, WNOHANG) == daemon->pid_) {
        exited = true;
        return true;
      }
      auto health = daemon->Get("/healthz", std::chrono::seconds(1));
      return health.ok() && health->status == 200;
    });
    if (exited || !up) {
      if (!exited) daemon->Kill();
      daemon->pid_ = -1;
      throw std::runtime_error("the daemon did not come up; log:\n" + daemon->log());
    }
    return daemon;
  }

  ~DaemonProcess() {
    Kill();
    if (std::uncaught_exceptions() == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }

  // SIGTERM (or `signal_number`) and wait: the exit code, or nullopt when it did not exit
  // within `deadline` (then it is killed).
  std::optional<int> Terminate(std::chrono::milliseconds deadline, int signal_number = SIGTERM) {
    if (pid_ <= 0) return std::nullopt;
    kill(pid_, signal_number);
    std::optional<int> code = WaitExit(pid_, deadline);
    if (!code) Kill();
    pid_ = -1;
    return code;
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string url() const {
    return (ca_file_.empty() ? "http" : "https") + std::string("://127.0.0.1:") +
           std::to_string(port_);
  }
  std::string dir() const { return dir_; }
  std::string log_path() const { return dir_ + "/daemon.log"; }
  std::string log() const {
    try {
      return mesh::testing::ReadFile(log_path());
    } catch (const std::exception&) {
      return "(no log)";
    }
  }

  Result<observers::HttpResponse> Get(
      const std::string& path, std::chrono::milliseconds timeout = kDaemonHttpTimeout) const {
    observers::HttpCall call;
    call.url = url() + path;
    call.ca_file = ca_file_;
    return observers::HttpSend(call, timeout);
  }
  Result<observers::HttpResponse> Post(
      const std::string& path, const std::string& token,
      std::chrono::milliseconds timeout = std::chrono::seconds(75)) const {
    observers::HttpCall call;
    call.method = "POST";
    call.url = url() + path;
    call.ca_file = ca_file_;
    if (!token.empty()) call.headers = {{"Authorization", "Bearer " + token}};
    return observers::HttpSend(call, timeout);
  }
  // POST /reconcile with `token`: the report of a pass that started after the call.
  Result<PassReport> Reconcile(const std::string& token,
                               std::chrono::milliseconds timeout = std::chrono::seconds(75)) const {
    auto reply = Post("/reconcile", token, timeout);
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) {
      return Status(Errc::kInternal, "HTTP " + std::to_string(reply->status) + ": " + reply->body);
    }
    return ReportFromJson(reply->body);
  }
  // Forces passes until one reports convergence, for up to `deadline`; `last` describes the
  // last answer (a report table, or the error).
  bool WaitConverged(const std::string& token, std::chrono::milliseconds deadline,
                     std::string& last) const {
    return mesh::testing::WaitFor(
        [&] {
          Result<PassReport> report = Reconcile(token);
          last = report.ok() ? FormatReportTable(*report) : report.status().ToString();
          return report.ok() && report->converged();
        },
        deadline);
  }
  // A metric's value from /metrics, nullopt when absent or unreachable.
  std::optional<double> Metric(const std::string& series) const {
    auto metrics = Get("/metrics");
    if (!metrics.ok() || metrics->status != 200) return std::nullopt;
    return MetricValue(metrics->body, series);
  }

 private:
  DaemonProcess() = default;
  std::string dir_;
  std::string ca_file_;  // HTTPS when set
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace mesh::reconciler::test
