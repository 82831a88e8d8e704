// The `plan` and `reconcile --once` commands, run as the real binary against a real
// nats-server: output, exit codes (0 converged, 2 drift, 1 error, 64 usage) and --help.
#include <rapidjson/document.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <vector>

#include "observers/jetstream.h"
#include "reconciler/apply/encode.h"
#include "reconciler/cli/settings.h"
#include "reconciler/pass/pass.h"
#include "tests/support/nats_client.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using test::LiveMesh;

struct Run {
  int exit_code = -1;
  std::string out;  // standard output only
};

// The command's environment: the test's own, with MESH_RECONCILER_PASSWORD the reconciler's
// password (it travels there in production) unless `password` says otherwise, and `set` added.
// Given to the child alone (env(1)): the test process's environment never changes, so no case
// leaves a variable behind for the next, and the runner's own MESH_RECONCILER_* are not seen.
struct ChildEnv {
  std::optional<std::string> password = test::kReconcilerPassword;  // nullopt: unset
  std::vector<std::string> set;                                     // NAME=value, shell-safe
};

// Runs the binary with `args` (shell words, already quoted where needed); stderr is discarded
// unless `with_stderr`.
Run RunBinary(const std::string& args, bool with_stderr = false, const ChildEnv& env = {}) {
  std::string command = "env";
  for (const char* name : {"MESH_RECONCILER_PASSWORD", "MESH_RECONCILER_YES",
                           "MESH_RECONCILER_LEASE", "MESH_RECONCILER_USERS_SCOPE"}) {
    command += std::string(" -u ") + name;
  }
  if (env.password) command += " 'MESH_RECONCILER_PASSWORD=" + *env.password + "'";
  for (const std::string& variable : env.set) command += " " + variable;
  command += std::string(" ") + MESH_BINARY + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
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

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The pass flags for `mesh`; the password travels in the environment (ChildEnv), as in
// production.
std::string PassFlags(const LiveMesh& mesh) {
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
    REQUIRE(
        (*bus)->Request({"$JS.API.STREAM.CREATE.DECL", EncodeStreamConfig(memory)}).status.ok());
    Run stuck = RunBinary("reconcile --once " + flags);
    CHECK(stuck.exit_code == 2);
    CHECK(HasLine(stuck.out, {"stream", "DECL", "differs", "report_only",
                              "storage: wanted file, found memory"}));
    CHECK(stuck.out.find("REMAINING") != std::string::npos);
  }
}

// The bcrypt count a command reports: `passwords_hashed` of a --json pass report, or the
// render-users note "N password(s) hashed".
int64_t HashedBy(const Run& json_run) {
  auto report = ReportFromJson(json_run.out);
  INFO(json_run.out);
  REQUIRE(report.ok());
  return report->passwords_hashed;
}

TEST_CASE("render-users, plan and reconcile --once on an existing users file run no bcrypt",
          "[pass][cli][integration][server]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-render-reuse");
  const std::string records = dir + "/records.json";
  const std::string out = dir + "/users.conf";
  mesh::testing::WriteFile(records, test::ExampleRecordsJson());
  const std::string render = "render-users " + records + " --out " + out + " --bcrypt-cost 4";

  Run first = RunBinary(render, true);
  CHECK(first.exit_code == 0);
  CHECK(first.out.find("note: 5 password(s) hashed") != std::string::npos);
  const std::string written = mesh::testing::ReadFile(out);
  Run second = RunBinary(render, true);  // the init container of the next pod
  CHECK(second.exit_code == 0);
  INFO(second.out);
  CHECK(second.out.find("note: 0 password(s) hashed") != std::string::npos);
  CHECK(mesh::testing::ReadFile(out) == written);
  // Without --out there is no file to reuse: everything is hashed (and printed).
  Run printed = RunBinary("render-users " + records + " --bcrypt-cost 4", false);
  CHECK(printed.out == written);
  std::filesystem::remove_all(dir);

  LiveMesh mesh(test::ExampleRecordsJson());
  const std::string flags = PassFlags(mesh);
  CHECK(HashedBy(RunBinary("plan --json " + flags)) == 0);
  CHECK(HashedBy(RunBinary("reconcile --once --json " + flags)) == 0);
  Run converged = RunBinary("plan --json " + flags);
  CHECK(converged.exit_code == 0);
  CHECK(HashedBy(converged) == 0);

  SECTION("a changed password: one bcrypt, a rewrite, and the server accepts the new one") {
    mesh.SetRecords(Replace(test::ExampleRecordsJson(), "demo-only-node-a-password",
                            "rotated-node-a-password"));
    Run plan = RunBinary("plan --json " + flags);
    CHECK(plan.exit_code == 2);
    // plan runs no bcrypt (issue 37 item 8): the entry is not proven, so it differs, and the
    // note says reconcile will hash it.
    CHECK(HashedBy(plan) == 0);
    auto planned = ReportFromJson(plan.out);
    REQUIRE(planned.ok());
    REQUIRE(planned->plan.drift.size() == 1);
    CHECK(planned->plan.drift[0].note.find("1 password(s) not proven by the file") !=
          std::string::npos);
    Run reconcile = RunBinary("reconcile --once --json " + flags);
    CHECK(reconcile.exit_code == 0);
    CHECK(HashedBy(reconcile) == 1);
    const std::string file = mesh::testing::ReadFile(mesh.server->users_file());
    CHECK(file.find("rotated-node-a-password") == std::string::npos);
    natsStatus status = NATS_OK;
    auto fresh = mesh::testing::ConnectNats(mesh.server->url(), "node-a", "rotated-node-a-password",
                                            {}, status);
    CHECK(status == NATS_OK);
    auto stale = mesh::testing::ConnectNats(mesh.server->url(), "node-a",
                                            "demo-only-node-a-password", {}, status);
    CHECK(status != NATS_OK);
    CHECK(HashedBy(RunBinary("plan --json " + flags)) == 0);
  }
  SECTION("a hand-edited digest is drift, and reconcile repairs it") {
    const std::string path = mesh.server->users_file();
    const std::string good = mesh::testing::ReadFile(path);
    std::string edited = good;
    const size_t at = edited.find("# credential digest: hmac-sha256-v1 ");
    REQUIRE(at != std::string::npos);
    char& digit = edited[at + std::string("# credential digest: hmac-sha256-v1 ").size()];
    digit = digit == '0' ? '1' : '0';
    mesh::testing::WriteFile(path, edited);
    Run plan = RunBinary("plan " + flags);
    CHECK(plan.exit_code == 2);
    CHECK(HasLine(plan.out, {"users_file", "differs", "rewrite"}));
    Run reconcile = RunBinary("reconcile --once --json " + flags);
    CHECK(reconcile.exit_code == 0);
    CHECK(HashedBy(reconcile) == 1);  // the entry whose digest no longer proves its hash
    CHECK(mesh::testing::ReadFile(path) == good);
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
  SECTION("no password and a wrong password are told apart, each with what to do") {
    Run none = RunBinary("plan --records " + mesh.records_path + " --bus " + mesh.server->url(),
                         true, {.password = std::nullopt, .set = {}});
    CHECK(none.exit_code == 1);
    CHECK(none.out.find("no password was given for user \"mesh-reconciler\" (give it in "
                        "MESH_RECONCILER_PASSWORD or a --password-file)") != std::string::npos);
    Run wrong = RunBinary("plan --records " + mesh.records_path + " --bus " + mesh.server->url(),
                          true, {.password = "not-the-password", .set = {}});
    CHECK(wrong.exit_code == 1);
    CHECK(wrong.out.find("the server refused the password given for user \"mesh-reconciler\"") !=
          std::string::npos);
    CHECK(wrong.out.find("not-the-password") == std::string::npos);
  }
  SECTION("an http:// or scheme-less bus URL is a usage error naming the URL to give") {
    const std::string port = mesh.server->url().substr(mesh.server->url().rfind(':') + 1);
    Run http =
        RunBinary("plan --records " + mesh.records_path + " --bus http://127.0.0.1:" + port, true);
    CHECK(http.exit_code == 64);
    CHECK(http.out.find("give nats://127.0.0.1:" + port) != std::string::npos);
    Run bare = RunBinary("plan --records " + mesh.records_path + " --bus 127.0.0.1:" + port, true);
    CHECK(bare.exit_code == 64);
    CHECK(bare.out.find("give the scheme") != std::string::npos);
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
  }  // Issue 37 item 5: a --store-dir without the server's JetStream layout was accepted, and the
  // first recreation settled instead. Now run and reconcile --once refuse it at start.
  SECTION("a --store-dir that is not the server's store") {
    const std::string wrong = mesh::testing::MakeTempDir("mesh-not-a-store");
    mesh::testing::WriteFile(wrong + "/notes.txt", "x");
    for (const std::string& command : {"reconcile --once " + flags, "run " + flags}) {
      Run run = RunBinary(command + " --store-dir " + wrong, true);
      INFO(command << "\n" << run.out);
      CHECK(run.exit_code == 64);
      CHECK(run.out.find("--store-dir " + wrong +
                         ": expected nats-server's store_dir, the folder that holds "
                         "jetstream/<account>/streams; found no jetstream/ folder but notes.txt") !=
            std::string::npos);
    }
    std::filesystem::remove_all(wrong);
  }
}

// Issue 37 item 8: a plan with another --bcrypt-cost than the daemon's re-hashed every password
// (70 s on the Large mesh) and listed every principal as differing. A hash of another cost that
// its digest proves is now kept: not drift, not rewritten, unless the operator gives --rehash,
// and plan hashes no password either way.
TEST_CASE("another --bcrypt-cost: proven hashes are kept, and --rehash lists and re-hashes them",
          "[pass][cli][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  const std::string flags = PassFlags(mesh);  // --bcrypt-cost 4
  REQUIRE(RunBinary("reconcile --once " + flags).exit_code == 0);
  const std::string path = mesh.server->users_file();
  const std::string at_4 = mesh::testing::ReadFile(path);
  REQUIRE(at_4.find("$2b$04$") != std::string::npos);
  const std::string cost_5 = " --bcrypt-cost 5";

  Run plan = RunBinary("plan --json " + flags + cost_5);
  INFO(plan.out);
  CHECK(plan.exit_code == 0);
  CHECK(HashedBy(plan) == 0);
  Run logged = RunBinary("plan " + flags + cost_5 + " --log-level info", true);
  CHECK(logged.exit_code == 0);
  CHECK(logged.out.find("hashes of another cost than --bcrypt-cost kept") != std::string::npos);
  CHECK(logged.out.find("users_file") == std::string::npos);  // no drift entry

  // reconcile (as the daemon's passes) at another cost leaves the file as it is.
  Run kept = RunBinary("reconcile --once --json " + flags + cost_5);
  CHECK(kept.exit_code == 0);
  CHECK(HashedBy(kept) == 0);
  CHECK(mesh::testing::ReadFile(path) == at_4);

  // --rehash: plan lists every plain password's entry, hashing none of them.
  Run rehash_plan = RunBinary("plan --json --rehash " + flags + cost_5);
  CHECK(rehash_plan.exit_code == 2);
  CHECK(HashedBy(rehash_plan) == 0);
  auto report = ReportFromJson(rehash_plan.out);
  REQUIRE(report.ok());
  REQUIRE(report->plan.drift.size() == 1);
  const DriftEntry& entry = report->plan.drift[0];
  CHECK(entry.kind == ObjectKind::kUsersFile);
  CHECK(entry.note.find("of them hashes of another cost to re-hash at cost 5 (--rehash)") !=
        std::string::npos);
  size_t plain = 0;
  for (const std::string user : {"billing", "mesh-controller", "mesh-reconciler", "node-a"}) {
    INFO(user);
    CHECK(std::any_of(entry.fields.begin(), entry.fields.end(),
                      [&](const FieldDiff& f) { return f.field == "principal " + user; }));
  }
  for (const FieldDiff& f : entry.fields) plain += f.found == "differs" ? 1 : 0;
  CHECK(entry.note.find(std::to_string(plain) + " password(s) not proven") != std::string::npos);

  // reconcile --rehash rewrites them at the new cost, once; then both costs agree with it.
  Run rehashed = RunBinary("reconcile --once --json --rehash " + flags + cost_5);
  CHECK(rehashed.exit_code == 0);
  CHECK(HashedBy(rehashed) == static_cast<int64_t>(plain));
  const std::string at_5 = mesh::testing::ReadFile(path);
  CHECK(at_5.find("$2b$05$") != std::string::npos);
  CHECK(RunBinary("plan " + flags + cost_5).exit_code == 0);
  CHECK(RunBinary("plan " + flags).exit_code == 0);
  CHECK(RunBinary("reconcile --once --rehash " + flags + cost_5).exit_code == 0);
  CHECK(mesh::testing::ReadFile(path) == at_5);
}

// The runbook's bus commands (reconciler/cli/cmd_bus.cc), in place of the `nats` CLI the image
// lacks: show-stream and show-consumer print what the server answers; delete-stream and
// delete-consumer act on the mesh's objects only, and only with --yes typed on the command
// line; after a deletion the next pass creates the object again.
TEST_CASE("the bus commands: show any object and delete only the mesh's with --yes",
          "[pass][cli][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  const std::string flags = PassFlags(mesh);
  REQUIRE(RunBinary("reconcile --once " + flags).exit_code == 0);
  {
    Settings settings = mesh.PassSettings();
    auto bus = observers::BusConnection::Connect(settings.bus);
    REQUIRE(bus.ok());
    observers::ApiReply created = (*bus)->Request(
        {"$JS.API.STREAM.CREATE.FOREIGN", R"({"name":"FOREIGN","subjects":["foreign.>"],)"
                                          R"("description":"\u001b[2Jwiped\nstate.messages 0"})"});
    REQUIRE(created.status.ok());
    REQUIRE_FALSE(observers::ParseApiError(created.payload));
  }

  SECTION("show-stream and show-consumer print the server's answer, one field a line") {
    Run stream = RunBinary("show-stream DECL " + flags);
    CHECK(stream.exit_code == 0);
    CHECK(HasLine(stream.out, {"stream DECL", "the mesh's"}));
    CHECK(HasLine(stream.out, {"config.name", "DECL"}));
    CHECK(HasLine(stream.out, {"state.messages", "0"}));
    CHECK(stream.out.find(test::kReconcilerPassword) == std::string::npos);

    Run json = RunBinary("show-stream DECL --json " + flags);
    CHECK(json.exit_code == 0);
    rapidjson::Document doc;
    doc.Parse(json.out.c_str());
    REQUIRE_FALSE(doc.HasParseError());
    CHECK(doc["schema"].GetString() == std::string("mesh-reconciler/stream/v1"));
    CHECK(doc["name"].GetString() == std::string("DECL"));
    CHECK(doc["owned"].GetBool());
    CHECK(doc["info"]["config"]["name"].GetString() == std::string("DECL"));
    CHECK_FALSE(doc["info"].HasMember("type"));

    Run consumer = RunBinary("show-consumer DECL decl_node-a " + flags);
    CHECK(consumer.exit_code == 0);
    CHECK(HasLine(consumer.out, {"consumer decl_node-a on stream DECL", "the mesh's"}));
    CHECK(HasLine(consumer.out, {"config.durable_name", "decl_node-a"}));
    CHECK(HasLine(consumer.out, {"num_pending", "0"}));
    CHECK(HasLine(consumer.out, {"num_ack_pending", "0"}));

    Run foreign = RunBinary("show-stream FOREIGN " + flags);
    CHECK(foreign.exit_code == 0);
    CHECK(HasLine(foreign.out, {"stream FOREIGN", "not the mesh's"}));
    // Its description, anybody's text, cannot drive the terminal or fake a line.
    CHECK(HasLine(foreign.out, {"config.description", "\\x1b[2Jwiped\\x0astate.messages 0"}));
    CHECK(foreign.out.find('\x1b') == std::string::npos);

    Run absent = RunBinary("show-stream NOPE " + flags, true);
    CHECK(absent.exit_code == 1);
    CHECK(absent.out.find("no stream NOPE") != std::string::npos);
    Run no_consumer = RunBinary("show-consumer DECL nope " + flags, true);
    CHECK(no_consumer.exit_code == 1);
    CHECK(no_consumer.out.find("no consumer nope on stream DECL") != std::string::npos);
  }

  SECTION("a deletion needs --yes on the command line, a name of one token, the mesh's mark") {
    Run unconfirmed = RunBinary("delete-stream DECL " + flags, true);
    CHECK(unconfirmed.exit_code == 64);
    CHECK(unconfirmed.out.find("add --yes") != std::string::npos);
    CHECK(RunBinary("delete-stream DECL " + flags, false, {.set = {"MESH_RECONCILER_YES=1"}})
              .exit_code == 64);
    CHECK(RunBinary("delete-stream 'DECL.x' --yes " + flags).exit_code == 64);
    CHECK(RunBinary("delete-consumer DECL '*' --yes " + flags).exit_code == 64);
    CHECK(RunBinary("delete-stream DECL --yes --json " + flags).exit_code == 64);

    Run foreign = RunBinary("delete-stream FOREIGN --yes " + flags, true);
    CHECK(foreign.exit_code == 1);
    CHECK(foreign.out.find("not the mesh's") != std::string::npos);
    CHECK(RunBinary("show-stream FOREIGN " + flags).exit_code == 0);  // still there
    CHECK(RunBinary("plan " + flags).exit_code == 0);                 // nothing deleted

    Run absent = RunBinary("delete-stream NOPE --yes " + flags, true);
    CHECK(absent.exit_code == 1);
    CHECK(absent.out.find("no stream NOPE") != std::string::npos);
  }

  SECTION("deleted with --yes, and the next pass creates it again") {
    Run consumer = RunBinary("delete-consumer DECL decl_node-a --yes " + flags);
    CHECK(consumer.exit_code == 0);
    CHECK(consumer.out.find("deleted consumer decl_node-a on stream DECL") != std::string::npos);
    Run plan = RunBinary("plan " + flags);
    CHECK(plan.exit_code == 2);
    CHECK(HasLine(plan.out, {"consumer", "DECL/decl_node-a", "missing"}));

    Run stream = RunBinary("delete-stream DECL --yes " + flags);
    CHECK(stream.exit_code == 0);
    CHECK(stream.out.find("deleted stream DECL") != std::string::npos);
    CHECK(HasLine(RunBinary("plan " + flags).out, {"stream", "DECL", "missing"}));

    CHECK(RunBinary("reconcile --once " + flags).exit_code == 0);
    CHECK(RunBinary("show-consumer DECL decl_node-a " + flags).exit_code == 0);
  }
}

TEST_CASE("plan --help and reconcile --help list every pass flag", "[pass][cli]") {
  for (const char* command : {"plan", "reconcile"}) {
    Run help = RunBinary(std::string(command) + " --help");
    INFO(command);
    CHECK(help.exit_code == 0);
    for (const char* flag : {"--records FILE", "--bus URL", "--user NAME", "--password-file FILE",
                             "--ca-file FILE", "--users-file FILE", "--users-scope SCOPE",
                             "--pid-file FILE", "--monitor URL", "--store-dir DIR", "--prune",
                             "--lease", "--bcrypt-cost N", "--json", "-o, --output FORMAT"}) {
      INFO(flag);
      CHECK(help.out.find(std::string("\n  ") + flag) != std::string::npos);
    }
    CHECK(help.out.find("--log-level") != std::string::npos);
    CHECK(help.out.find("Exit codes") != std::string::npos);
  }
  CHECK(RunBinary("reconcile --help").out.find("--remote") != std::string::npos);
}

// The chart's init container renders the first users file with the daemon's settings. Before
// issue 14, render-users ignored --lease: the file lacked the lease's subject, the daemon's first
// pass rewrote it, and until then the server logged a publish violation on
// $KV.mesh_reconciler_lease.holder.
TEST_CASE("render-users honours --lease and --users-scope, from flags or the environment",
          "[cli]") {
  const std::string records = std::string(MESH_SOURCE_DIR) + "/examples/records.json";
  const std::string base = "render-users " + records + " --bcrypt-cost 4";
  Run plain = RunBinary(base);
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out.find("$KV.mesh_reconciler_lease.holder") == std::string::npos);
  CHECK(plain.out.find("\naccounts {\n") != std::string::npos);

  Run leased = RunBinary(base + " --lease");
  REQUIRE(leased.exit_code == 0);
  CHECK(leased.out.find("\"$KV.mesh_reconciler_lease.holder\"") != std::string::npos);
  CHECK(leased.out.find("\"$KV.mesh_reconciler_lease.hold\"") != std::string::npos);
  CHECK(plain.out.find("$KV.mesh_reconciler_lease.hold\"") == std::string::npos);

  Run from_env = RunBinary(
      base, false, {.set = {"MESH_RECONCILER_LEASE=1", "MESH_RECONCILER_USERS_SCOPE=account"}});
  REQUIRE(from_env.exit_code == 0);
  CHECK(from_env.out.find("\"$KV.mesh_reconciler_lease.holder\"") != std::string::npos);
  CHECK(from_env.out.find("\naccounts {\n") == std::string::npos);
  CHECK(from_env.out.find("\n\"MESH\": {\n  jetstream: enabled\n") != std::string::npos);
}

}  // namespace
}  // namespace mesh::reconciler
