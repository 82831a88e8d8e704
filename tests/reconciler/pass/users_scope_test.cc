// --users-scope account on a real nats-server: the users file is only the mesh's account entry,
// included inside the operator's own `accounts` block beside another account and its user. The
// reconciler converges, repairs a hand edit (rewrite, SIGHUP, reload confirmed), and the other
// account's user connects before and after; `nats-server -t` accepts the configuration.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "model/users_file.h"
#include "observers/monitor.h"
#include "reconciler/pass/pass.h"
#include "tests/support/nats_client.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using mesh::testing::ReadFile;
using mesh::testing::WaitFor;
using mesh::testing::WriteFile;

constexpr char kNodeAPassword[] = "demo-only-node-a-password";
constexpr char kOtherUser[] = "billing-app";
constexpr char kOtherPassword[] = "operator-own-password";
// The operator's own account, as it would sit in their configuration beside the include.
constexpr char kOtherAccounts[] =
    "  BILLING: {\n"
    "    users: [ { user: \"billing-app\", password: \"operator-own-password\" } ]\n"
    "  }\n";

bool Connects(const mesh::testing::NatsServer& server, const std::string& user,
              const std::string& password) {
  try {
    return mesh::testing::ConnectNats({server.url()}, user, password) != nullptr;
  } catch (const std::runtime_error&) {
    return false;
  }
}

int64_t LoadTime(const mesh::testing::NatsServer& server) {
  return observers::ObserveServer(server.monitor_url(), std::chrono::seconds(2))
      .config_load_time_unix_ns;
}

// `nats-server -t -c CONFIG`: the configuration (with its includes) is valid.
int CheckConfig(const std::string& config) {
  const std::string command = "nats-server -t -c '" + config + "' >/dev/null 2>&1";
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct AccountScopedMesh {
  std::unique_ptr<mesh::testing::NatsServer> server;
  std::string dir = mesh::testing::MakeTempDir("mesh-scope");
  std::string records_path = dir + "/records.json";

  AccountScopedMesh() {
    const std::string records = test::ExampleRecordsJson();
    WriteFile(records_path, records);
    mesh::testing::NatsServerOptions options;
    options.users_conf =
        test::RenderedUsersConf(records, test::kCheapCost, model::UsersScope::kAccount);
    options.other_accounts = kOtherAccounts;
    server = mesh::testing::NatsServer::Start(options);
  }
  ~AccountScopedMesh() {
    server.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
  Settings PassSettings() const {
    Settings s;
    s.records_path = records_path;
    s.bus.urls = {server->url()};
    s.bus.user = test::kReconcilerUser;
    s.bus.password = test::kReconcilerPassword;
    s.bus.request_timeout = std::chrono::seconds(5);
    s.bus.connect_timeout = std::chrono::seconds(2);
    s.users_file = server->users_file();
    s.users_scope = model::UsersScope::kAccount;
    s.pid_file = server->pid_file();
    s.monitor_url = server->monitor_url();
    s.bcrypt_cost = test::kCheapCost;
    return s;
  }
};

TEST_CASE("users scope account: one account entry beside the operator's own accounts",
          "[pass][integration][users-scope][server]") {
  AccountScopedMesh mesh;
  const std::string path = mesh.server->users_file();
  const std::string rendered = ReadFile(path);
  CHECK(rendered.find("\naccounts {\n") == std::string::npos);  // only the header names it
  CHECK(CheckConfig(mesh.server->main_config()) == 0);
  REQUIRE(Connects(*mesh.server, kOtherUser, kOtherPassword));
  REQUIRE(Connects(*mesh.server, "node-a", kNodeAPassword));

  Reconciler reconciler(mesh.PassSettings());
  PassReport first = reconciler.RunPass(1, Trigger::kForced, ApplyMode::kApply);
  INFO(FormatReportTable(first));
  REQUIRE(first.status.ok());
  REQUIRE(first.converged());
  // The file the server started with is the one the reconciler wants: no users-file action.
  for (const ActionOutcome& o : first.outcomes) {
    CHECK(o.action.kind != ActionKind::kWriteUsersFile);
    CHECK(o.action.kind != ActionKind::kReloadServer);
  }
  CHECK(ReadFile(path) == rendered);

  // A hand edit that the server loads: node-a is locked out.
  std::string edited = rendered;
  const std::string block = model::SplitUserBlocks(rendered).at(UserName("node-a"));
  edited.erase(edited.find(block), block.size());
  const int64_t before = LoadTime(*mesh.server);
  WriteFile(path, edited);
  REQUIRE(kill(mesh.server->pid(), SIGHUP) == 0);
  REQUIRE(WaitFor([&] { return LoadTime(*mesh.server) > before; }));
  REQUIRE_FALSE(Connects(*mesh.server, "node-a", kNodeAPassword));
  REQUIRE(Connects(*mesh.server, kOtherUser, kOtherPassword));

  PassReport repair = reconciler.RunPass(2, Trigger::kUsersFileChanged, ApplyMode::kApply);
  INFO(FormatReportTable(repair));
  REQUIRE(repair.plan.drift.size() == 1);
  CHECK(repair.plan.drift[0].fields ==
        std::vector<FieldDiff>{{"principal node-a", "present", "absent"}});
  REQUIRE(repair.outcomes.size() == 2);
  CHECK(repair.outcomes[0].action.kind == ActionKind::kWriteUsersFile);
  CHECK(repair.outcomes[0].outcome == Outcome::kDone);
  CHECK(repair.outcomes[1].action.kind == ActionKind::kReloadServer);
  CHECK(repair.outcomes[1].outcome == Outcome::kDone);  // reload confirmed through /varz
  CHECK(repair.converged());
  CHECK(ReadFile(path) == rendered);  // byte-stable
  CHECK(std::filesystem::status(path).permissions() ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write));
  CHECK(Connects(*mesh.server, "node-a", kNodeAPassword));
  CHECK(Connects(*mesh.server, kOtherUser, kOtherPassword));
  CHECK(CheckConfig(mesh.server->main_config()) == 0);

  PassReport after = reconciler.RunPass(3, Trigger::kForced, ApplyMode::kObserveOnly);
  CHECK(after.plan.drift.empty());
}

TEST_CASE("users scope server: a file rendered for the account scope is drift, and back",
          "[pass][integration][users-scope][server]") {
  // The scope is part of what is compared: a daemon started with the wrong scope for its file
  // sees the difference rather than calling it converged.
  AccountScopedMesh mesh;
  Settings settings = mesh.PassSettings();
  settings.users_scope = model::UsersScope::kServer;
  Reconciler reconciler(settings);
  PassReport plan = reconciler.RunPass(1, Trigger::kOnce, ApplyMode::kObserveOnly);
  INFO(FormatReportTable(plan));
  REQUIRE(plan.status.ok());
  bool users_file_drift = false;
  for (const DriftEntry& e : plan.plan.drift) {
    users_file_drift = users_file_drift || e.kind == ObjectKind::kUsersFile;
  }
  CHECK(users_file_drift);
}

}  // namespace
}  // namespace mesh::reconciler
