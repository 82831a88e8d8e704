// The `plan` and `reconcile --once` commands, run as the real binary against a real
// nats-server: output, exit codes (0 converged, 2 drift, 1 error, 64 usage) and --help.
#include <stdlib.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "observers/jetstream.h"
#include "reconciler/pass.h"
#include "reconciler/settings.h"
#include "tests/reconciler/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using test::LiveMesh;

struct Run {
  int exit_code = -1;
  std::string out;  // standard output only
};

// Runs the binary with `args` (shell words, already quoted where needed); stderr is discarded
// unless `with_stderr`.
Run RunBinary(const std::string& args, bool with_stderr = false) {
  const std::string command =
      std::string(MESH_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  std::FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  Run run;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) run.out.append(buffer, n);
  const int status = pclose(pipe);
  REQUIRE(WIFEXITED(status));
  run.exit_code = WEXITSTATUS(status);
  return run;
}

// True when some line of `text` holds every one of `words`, in that order.
bool HasLine(const std::string& text, const std::vector<std::string>& words) {
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    size_t at = 0;
    bool all = true;
    for (const std::string& word : words) {
      at = line.find(word, at);
      if (at == std::string::npos) {
        all = false;
        break;
      }
      at += word.size();
    }
    if (all) return true;
    start = end + 1;
  }
  return false;
}

// The pass flags for `mesh`; the password travels in the environment, as in production.
std::string PassFlags(const LiveMesh& mesh) {
  setenv("MESH_RECONCILER_PASSWORD", test::kReconcilerPassword, 1);
  return "--records " + mesh.records_path + " --bus " + mesh.server->url() + " --users-file " +
         mesh.server->users_file() + " --pid-file " + mesh.server->pid_file() + " --monitor " +
         mesh.server->monitor_url() + " --bcrypt-cost 4 --log-level error";
}

TEST_CASE("plan and reconcile --once: exit codes and what they print",
          "[pass][cli][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  const std::string flags = PassFlags(mesh);

  Run plan = RunBinary("plan " + flags);
  CHECK(plan.exit_code == 2);
  CHECK(plan.out.find("KIND") != std::string::npos);
  CHECK(HasLine(plan.out, {"KIND", "NAME", "STATE", "REMEDY", "DETAILS"}));
  CHECK(HasLine(plan.out, {"stream", "CONTROL", "missing", "create"}));
  CHECK(HasLine(plan.out, {"create_consumer", "DECL/decl_node-a", "planned (not applied)"}));
  CHECK(plan.out.find("planned (not applied)") != std::string::npos);
  CHECK(plan.out.find("node-c") != std::string::npos);  // without a credential
  CHECK(plan.out.find(test::kReconcilerPassword) == std::string::npos);
  // plan changed nothing: a second plan sees the same drift.
  CHECK(RunBinary("plan " + flags).exit_code == 2);

  Run json = RunBinary("plan --json " + flags);
  CHECK(json.exit_code == 2);
  auto report = ReportFromJson(json.out);
  REQUIRE(report.ok());
  CHECK(report->mode == ApplyMode::kObserveOnly);
  CHECK(report->plan.drift.size() == report->plan.actions.size());
  CHECK_FALSE(report->plan.drift.empty());

  Run reconcile = RunBinary("reconcile --once " + flags);
  CHECK(reconcile.exit_code == 0);
  CHECK(reconcile.out.find("ACTIONS") != std::string::npos);
  CHECK(HasLine(reconcile.out, {"create_consumer", "DECL/decl_node-a", "done"}));

  Run after = RunBinary("plan " + flags);
  CHECK(after.exit_code == 0);
  CHECK(after.out.find("converged") != std::string::npos);

  SECTION("drift that reconcile cannot repair: exit 2") {
    Settings settings = mesh.PassSettings();
    auto bus = observers::BusConnection::Connect(settings.bus);
    REQUIRE(bus.ok());
    model::StreamSpec memory;
    for (const auto& s : test::DesiredFrom(test::ExampleRecordsJson()).streams) {
      if (s.name.str() == "DECL") memory = s;
    }
    memory.storage = model::Storage::kMemory;
    REQUIRE((*bus)->Request({"$JS.API.STREAM.DELETE.DECL", ""}).status.ok());
    REQUIRE((*bus)
                ->Request({"$JS.API.STREAM.CREATE.DECL", observers::EncodeStreamConfig(memory)})
                .status.ok());
    Run stuck = RunBinary("reconcile --once " + flags);
    CHECK(stuck.exit_code == 2);
    CHECK(HasLine(stuck.out, {"stream", "DECL", "differs", "report_only",
                              "storage: wanted file, found memory"}));
    CHECK(stuck.out.find("REMAINING") != std::string::npos);
  }
}

TEST_CASE("plan and reconcile: errors exit 1, usage errors 64",
          "[pass][cli][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  const std::string flags = PassFlags(mesh);

  SECTION("bus unreachable") {
    const std::string nowhere = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
    Run run = RunBinary("plan --records " + mesh.records_path + " --bus " + nowhere, true);
    CHECK(run.exit_code == 1);
    CHECK(run.out.find("error") != std::string::npos);
  }
  SECTION("records invalid") {
    mesh.SetRecords("{}");
    CHECK(RunBinary("plan " + flags).exit_code == 1);
    CHECK(RunBinary("reconcile --once " + flags).exit_code == 1);
  }
  SECTION("a missing flag or a missing --once") {
    CHECK(RunBinary("plan --bus " + mesh.server->url()).exit_code == 64);
    CHECK(RunBinary("plan --records " + mesh.records_path).exit_code == 64);
    CHECK(RunBinary("reconcile " + flags).exit_code == 64);
  }
}

TEST_CASE("plan --help and reconcile --help list every pass flag", "[pass][cli]") {
  for (const char* command : {"plan", "reconcile"}) {
    Run help = RunBinary(std::string(command) + " --help");
    INFO(command);
    CHECK(help.exit_code == 0);
    CHECK(help.out.find(PassSettingsHelp()) != std::string::npos);
    CHECK(help.out.find("--log-level") != std::string::npos);
    CHECK(help.out.find("Exit codes") != std::string::npos);
  }
  CHECK(RunBinary("reconcile --help").out.find("--remote") != std::string::npos);
}

}  // namespace
}  // namespace mesh::reconciler
