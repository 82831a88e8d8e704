// Faults that once needed a person (issue 13), each on real processes: the real daemon binary
// against a real nats-server, stopped by PID. A FIFO in a file's place, credentials in a URL's
// query string, a weak admin token, the users file's mode, owner and kind, and a broken users
// file or a rotated password while the server is down or refuses us.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "reconciler/pass/pass.h"
#include "tests/support/daemon_support.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler::test {
namespace {

using mesh::testing::ReadFile;
using mesh::testing::WaitFor;
using mesh::testing::WriteFile;
using std::chrono::seconds;

constexpr char kToken[] = "self-heal-test-token-6a1f0c9e3b7d52";
constexpr char kOtherToken[] = "self-heal-test-token-0b8e4d2c7f19a6";
// A forced pass blocked on a FIFO would never answer: well below the daemon's own limit.
constexpr auto kForcedPassDeadline = seconds(30);
// A command that should refuse at once; one that waits on a FIFO is killed at this deadline.
constexpr auto kRefusalDeadline = seconds(15);

// Replaces `path` atomically, as an operator or a ConfigMap update would.
void ReplaceFile(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".new";
  WriteFile(temporary, bytes);
  std::filesystem::rename(temporary, path);
}

// Puts a FIFO in `path`'s place (by rename, as an atomic replacement would).
void ReplaceWithFifo(const std::string& path) {
  const std::string temporary = path + ".fifo";
  REQUIRE(mkfifo(temporary.c_str(), 0600) == 0);
  std::filesystem::rename(temporary, path);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

struct stat LinkStat(const std::string& path) {
  struct stat info {};
  REQUIRE(lstat(path.c_str(), &info) == 0);
  return info;
}

// The users file as the reconciler keeps it: a regular file, mode 0600, owned by us.
bool UsersFileAsOwned(const std::string& path) {
  struct stat info {};
  return lstat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         (info.st_mode & 07777) == 0600 && info.st_uid == geteuid();
}

// `mesh-reconciler <args>` with `env` added; its exit code (-1 when it was still running at
// `deadline`, then killed) and what it printed.
CliResult RunWithEnv(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     std::chrono::milliseconds deadline = kRefusalDeadline) {
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-cli");
  const std::string log = dir + "/out.txt";
  const pid_t pid = SpawnWithLog(MESH_BINARY, args, env, log);
  std::optional<int> code = WaitExit(pid, deadline);
  if (!code) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  CliResult result{code.value_or(-1), ReadFile(log)};
  std::filesystem::remove_all(dir);
  return result;
}

// A live mesh and the daemon on it (interval 1h: only the watcher, advisories and forced
// passes run passes), its token in a file of the mesh's folder.
class Healing {
 public:
  explicit Healing(std::string password = kReconcilerPassword)
      : mesh_(ExampleRecordsJson()), password_(std::move(password)) {
    token_path_ = mesh_.dir + "/admin.token";
    WriteFile(token_path_, std::string(kToken) + "\n");
    const Settings s = mesh_.PassSettings();
    daemon_ = DaemonProcess::Start(
        {"--records", s.records_path, "--bus", s.bus.urls[0], "--user", s.bus.user, "--users-file",
         s.users_file, "--pid-file", s.pid_file, "--monitor", s.monitor_url, "--bcrypt-cost",
         std::to_string(kCheapCost), "--token-file", token_path_, "--interval", "1h"},
        {"MESH_RECONCILER_PASSWORD=" + password_});
  }

  std::string users_file() const { return mesh_.server->users_file(); }

  // POST /reconcile: the report of a pass that started after the call.
  Result<PassReport> Reconcile() { return daemon_->Reconcile(kToken, kForcedPassDeadline); }
  void WaitConverged() {
    std::string last;
    const bool converged = daemon_->WaitConverged(kToken, seconds(60), last);
    INFO(last);
    INFO(daemon_->log());
    REQUIRE(converged);
  }
  // The HTTP status of POST /release with `token` (0 when it does not answer).
  int PostStatus(const std::string& token) {
    auto reply = daemon_->Post("/release", token, seconds(10));
    return reply.ok() ? reply->status : 0;
  }
  std::string Drift() {
    auto drift = daemon_->Get("/drift");
    return drift.ok() ? drift->body : "";
  }

  LiveMesh mesh_;
  std::string password_;
  std::string token_path_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// ---------- 4. a FIFO (or any non-regular file) in a file's place ----------

TEST_CASE("A FIFO as the records, users file or token file never blocks the daemon",
          "[faults][daemon][integration][server]") {
  Healing f;
  f.WaitConverged();

  // The records: refused at once, the last valid ones kept (nothing to do on a converged bus).
  ReplaceWithFifo(f.mesh_.records_path);
  Result<PassReport> report = f.Reconcile();
  INFO(f.daemon_->log());
  REQUIRE(report.ok());
  CHECK_FALSE(report->records_valid);
  REQUIRE_FALSE(report->records_errors.empty());
  CHECK(Contains(report->records_errors[0], "is not a regular file"));
  CHECK(report->plan.actions.empty());
  ReplaceFile(f.mesh_.records_path, ExampleRecordsJson());
  f.WaitConverged();

  // The users file: observed as unreadable, replaced by a regular file, reloaded.
  ReplaceWithFifo(f.users_file());
  f.WaitConverged();
  CHECK(UsersFileAsOwned(f.users_file()));

  // The token file: the watcher's reload refuses it (POSTs off), a good token turns them on.
  REQUIRE(f.PostStatus(kToken) == 200);
  ReplaceWithFifo(f.token_path_);
  REQUIRE(WaitFor([&] { return f.PostStatus(kToken) == 403; }));
  CHECK(Contains(f.daemon_->log(), "is not a regular file"));
  ReplaceFile(f.token_path_, std::string(kOtherToken) + "\n");
  REQUIRE(WaitFor([&] { return f.PostStatus(kOtherToken) == 200; }));
}

TEST_CASE("A FIFO as the password, token or records file at start is refused at once",
          "[faults][daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-fifo");
  const std::string fifo = dir + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  const std::string records = dir + "/records.json";
  WriteFile(records, ExampleRecordsJson());
  const std::string token = dir + "/token";
  WriteFile(token, std::string(kToken) + "\n");
  const std::string bus = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  const std::vector<std::string> password_env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                                 kReconcilerPassword};

  SECTION("--password-file") {
    CliResult run = RunWithEnv({"run", "--records", records, "--bus", bus, "--password-file", fifo,
                                "--token-file", token, "--listen", "127.0.0.1:0"},
                               {});
    INFO(run.output);
    CHECK(run.exit_code != 0);
    CHECK(run.exit_code != -1);  // answered, not killed at the deadline
    CHECK(Contains(run.output, "--password-file " + fifo + " is not a regular file"));
  }
  SECTION("--token-file") {
    CliResult run = RunWithEnv({"run", "--records", records, "--bus", bus, "--token-file", fifo,
                                "--listen", "127.0.0.1:0"},
                               password_env);
    INFO(run.output);
    CHECK(run.exit_code == 1);
    CHECK(Contains(run.output, "--token-file " + fifo + " is not a regular file"));
    // The on-call commands read it too.
    CliResult remote =
        RunWithEnv({"release", "--remote", "http://127.0.0.1:1", "--token-file", fifo}, {});
    INFO(remote.output);
    CHECK(remote.exit_code != -1);
    CHECK(Contains(remote.output, "is not a regular file"));
  }
  SECTION("--records for a one-shot validate") {
    CliResult validate = RunWithEnv({"validate", fifo}, {});
    INFO(validate.output);
    CHECK(validate.exit_code != 0);
    CHECK(validate.exit_code != -1);
    CHECK(Contains(validate.output, "is not a regular file"));
  }
  std::filesystem::remove_all(dir);
}

// ---------- 6. credentials in a URL's query string ----------

TEST_CASE("Credentials in a bus or monitor URL's query string are refused, never logged",
          "[faults][daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-query");
  const std::string records = dir + "/records.json";
  WriteFile(records, ExampleRecordsJson());
  const std::string secret = "S3cret-in-the-query";
  const std::string host = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  const std::vector<std::string> password_env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                                 kReconcilerPassword};
  const std::vector<std::string> queries = {"/?user=u&pass=" + secret,
                                            "?token=" + secret,
                                            "/?password=" + secret,
                                            "/?nkey=" + secret,
                                            "/?jwt=" + secret,
                                            "/?x=" + secret,
                                            "#" + secret};
  for (const std::string& query : queries) {
    INFO("query: " << query);
    CliResult flag = RunWithEnv({"run", "--records", records, "--bus", host + query}, password_env);
    INFO(flag.output);
    CHECK(flag.exit_code == 64);
    CHECK(Contains(flag.output, query.front() == '#'
                                    ? "--bus: a fragment in a URL is refused"
                                    : "--bus: a query string in a URL is refused"));
    CHECK_FALSE(Contains(flag.output, secret));

    CliResult env = RunWithEnv({"run", "--records", records},
                               {password_env[0], "MESH_RECONCILER_BUS=" + host + query});
    INFO(env.output);
    CHECK(env.exit_code == 64);
    CHECK_FALSE(Contains(env.output, secret));

    CliResult plan = RunWithEnv({"plan", records, "--bus", host + query}, password_env);
    INFO(plan.output);
    CHECK(plan.exit_code == 64);
    CHECK_FALSE(Contains(plan.output, secret));

    CliResult monitor = RunWithEnv(
        {"run", "--records", records, "--bus", host, "--monitor", "http://127.0.0.1:1" + query},
        password_env);
    INFO(monitor.output);
    CHECK(monitor.exit_code == 64);
    CHECK(Contains(monitor.output, query.front() == '#'
                                       ? "--monitor: a fragment in a URL is refused"
                                       : "--monitor: a query string in a URL is refused"));
    CHECK_FALSE(Contains(monitor.output, secret));
  }
  std::filesystem::remove_all(dir);
}

// ---------- 6b. anything but scheme://host:port in an address (issue 38) ----------

TEST_CASE("An address with more than scheme, host and port is refused at start, never echoed",
          "[faults][daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-address");
  const std::string records = dir + "/records.json";
  WriteFile(records, ExampleRecordsJson());
  const std::string token_file = dir + "/token";
  WriteFile(token_file, std::string(kToken) + "\n");
  chmod(token_file.c_str(), 0600);
  const std::string secret = "S3cret-in-the-address";
  const std::string host = "127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  const std::vector<std::string> password_env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                                 kReconcilerPassword};
  struct Form {
    std::string suffix;  // after scheme://host:port
    std::string part;    // what the refusal names
  };
  const std::vector<Form> forms = {{";pass=" + secret, "parameters after ';'"},
                                   {"/" + secret, "a path"},
                                   {"/%3Fpass=" + secret, "a path"},
                                   {"/?token=" + secret, "a query string"}};
  for (const Form& form : forms) {
    INFO("suffix: " << form.suffix);
    // The daemon: refused at start (it used to log the URL in every retry, for ever).
    CliResult run = RunWithEnv({"run", "--records", records, "--bus",
                                "nats://" + host + form.suffix, "--listen", "127.0.0.1:0"},
                               password_env);
    INFO(run.output);
    CHECK(run.exit_code == 64);
    CHECK(Contains(run.output, "--bus: " + form.part + " in a URL is refused"));
    CHECK_FALSE(Contains(run.output, secret));

    CliResult env =
        RunWithEnv({"run", "--records", records, "--listen", "127.0.0.1:0"},
                   {password_env[0], "MESH_RECONCILER_BUS=nats://" + host + form.suffix});
    INFO(env.output);
    CHECK(env.exit_code == 64);
    CHECK_FALSE(Contains(env.output, secret));

    CliResult once = RunWithEnv(
        {"reconcile", "--once", "--records", records, "--bus", "nats://" + host + form.suffix},
        password_env);
    INFO(once.output);
    CHECK(once.exit_code == 64);
    CHECK_FALSE(Contains(once.output, secret));
  }
  // http(s) has a path (nats-server's http_base_path, a proxy's prefix): allowed for --monitor
  // and --remote, never shown; a query, ';' parameters and userinfo are refused.
  for (const Form& form :
       {Form{"/?token=" + secret, "a query string"},
        Form{"/x;token=" + secret, "parameters after ';'"}, Form{"#" + secret, "a fragment"}}) {
    INFO("suffix: " << form.suffix);
    CliResult remote = RunWithEnv(
        {"reconcile", "--remote", "http://" + host + form.suffix, "--token-file", token_file}, {});
    INFO(remote.output);
    CHECK(remote.exit_code == 64);
    CHECK(Contains(remote.output, "--remote: " + form.part + " in a URL is refused"));
    CHECK_FALSE(Contains(remote.output, secret));

    CliResult monitor = RunWithEnv({"run", "--records", records, "--bus", "nats://" + host,
                                    "--monitor", "http://" + host + form.suffix},
                                   password_env);
    INFO(monitor.output);
    CHECK(monitor.exit_code == 64);
    CHECK(Contains(monitor.output, "--monitor: " + form.part + " in a URL is refused"));
    CHECK_FALSE(Contains(monitor.output, secret));
  }
  CliResult userinfo = RunWithEnv(
      {"hold", "--remote", "http://u:" + secret + "@" + host, "--token-file", token_file}, {});
  INFO(userinfo.output);
  CHECK(userinfo.exit_code == 64);
  CHECK(Contains(userinfo.output, "--remote: userinfo in a URL is refused"));
  CHECK_FALSE(Contains(userinfo.output, secret));
  // A path is sent, but a failed connection names scheme, host and port only.
  CliResult path = RunWithEnv(
      {"reconcile", "--remote", "http://" + host + "/" + secret, "--token-file", token_file}, {});
  INFO(path.output);
  CHECK(path.exit_code == 1);
  CHECK(Contains(path.output, "http://" + host));
  CHECK_FALSE(Contains(path.output, secret));
  std::filesystem::remove_all(dir);
}

// ---------- 7. the admin token's minimum ----------

TEST_CASE("A weak or empty admin token is refused at start, saying how to make one",
          "[faults][daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-token");
  const std::string records = dir + "/records.json";
  WriteFile(records, ExampleRecordsJson());
  const std::string token = dir + "/token";
  const std::string bus = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  const std::vector<std::string> password_env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                                 kReconcilerPassword};
  const std::vector<std::string> run = {"run",          "--records", records,    "--bus",      bus,
                                        "--token-file", token,       "--listen", "127.0.0.1:0"};
  struct Weak {
    std::string content;
    std::string says;
  };
  const std::vector<Weak> weak = {
      {"tiny9\n", "the token is too short"},
      {"a b\n", "the token is too short"},
      {std::string(31, 'k') + "\n", "the token is too short"},
      {"0123456789abcdef 0123456789abcdef\n", "has whitespace or a control character inside"},
      {std::string(64, 'x') + "\n", "has too few different characters"},
      {"abababababababababababababababababab\n", "has too few different characters"},
      {"\n", "is empty: it holds no token"},
      {"", "is empty: it holds no token"},
  };
  for (const Weak& w : weak) {
    INFO("token file holds \"" << w.content << "\"");
    WriteFile(token, w.content);
    CliResult refused = RunWithEnv(run, password_env);
    INFO(refused.output);
    CHECK(refused.exit_code == 1);
    CHECK(Contains(refused.output, w.says));
    CHECK(Contains(refused.output, "openssl rand -hex 32 > " + token));
    const std::string stripped = w.content.substr(0, w.content.find('\n'));
    if (stripped.size() > 3) CHECK_FALSE(Contains(refused.output, stripped));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("A token file with a byte order mark is refused, one readable by others warns",
          "[faults][daemon]") {
  // Both readers of --token-file: the daemon (at start and on reload) and the on-call CLI.
  const std::string dir = mesh::testing::MakeTempDir("mesh-heal-token-file");
  const std::string records = dir + "/records.json";
  WriteFile(records, ExampleRecordsJson());
  const std::string token = dir + "/token";
  const std::string bus = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  const std::vector<std::string> password_env = {std::string("MESH_RECONCILER_PASSWORD=") +
                                                 kReconcilerPassword};
  auto write_token = [&](const std::string& bytes, mode_t mode) {
    const std::string temporary = token + ".new";
    WriteFile(temporary, bytes);
    REQUIRE(chmod(temporary.c_str(), mode) == 0);
    std::filesystem::rename(temporary, token);
  };
  const std::string bom = "\xEF\xBB\xBF";

  // A byte order mark: refused at start and by the CLI, naming it, never the token.
  write_token(bom + kToken + "\n", 0600);
  CliResult run = RunWithEnv(
      {"run", "--records", records, "--bus", bus, "--token-file", token, "--listen", "127.0.0.1:0"},
      password_env);
  INFO(run.output);
  CHECK(run.exit_code == 1);
  CHECK(Contains(run.output, "byte order mark"));
  CHECK_FALSE(Contains(run.output, kToken));
  CliResult cli =
      RunWithEnv({"release", "--remote", "http://127.0.0.1:1", "--token-file", token}, {});
  INFO(cli.output);
  CHECK(cli.exit_code != -1);
  CHECK(cli.exit_code != 0);
  CHECK(Contains(cli.output, "byte order mark"));
  CHECK_FALSE(Contains(cli.output, kToken));

  // Readable by others: used, with a warning in the daemon's log and on the CLI's stderr.
  write_token(std::string(kToken) + "\n", 0644);
  auto daemon = DaemonProcess::Start(
      {"--records", records, "--bus", bus, "--token-file", token, "--interval", "1h"},
      password_env);
  CHECK(WaitFor([&] { return Contains(daemon->log(), "admin token file readable by others"); }));
  CHECK(Contains(daemon->log(), "(mode 0644)"));
  CHECK_FALSE(Contains(daemon->log(), kToken));
  auto status = [&](const std::string& bearer) {
    auto reply = daemon->Post("/release", bearer, seconds(10));
    return reply.ok() ? reply->status : 0;
  };
  CHECK(status(kToken) == 200);
  CliResult warned = RunWithEnv({"release", "--remote", daemon->url(), "--token-file", token}, {});
  INFO(warned.output);
  CHECK(warned.exit_code == 0);
  CHECK(Contains(warned.output, "warning: --token-file " + token + " is readable by others"));
  // 0600: no warning.
  write_token(std::string(kToken) + "\n", 0600);
  CliResult quiet = RunWithEnv({"release", "--remote", daemon->url(), "--token-file", token}, {});
  INFO(quiet.output);
  CHECK(quiet.exit_code == 0);
  CHECK_FALSE(Contains(quiet.output, "warning"));
  // Reloaded to a file with a byte order mark: the POSTs are turned off and the log says why.
  write_token(bom + kOtherToken + "\n", 0600);
  CHECK(WaitFor([&] { return status(kToken) == 403; }));
  CHECK(status(kOtherToken) == 403);
  CHECK(WaitFor([&] { return Contains(daemon->log(), "byte order mark"); }));
  CHECK_FALSE(Contains(daemon->log(), kOtherToken));
  CHECK(daemon->Terminate(seconds(10)) == 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("A reload to a weak admin token keeps refusing POSTs and says why",
          "[faults][daemon][integration][server]") {
  Healing f;
  REQUIRE(f.PostStatus(kToken) == 200);
  ReplaceFile(f.token_path_, "short\n");
  REQUIRE(WaitFor([&] { return f.PostStatus(kToken) == 403; }));
  CHECK(f.PostStatus("short") == 403);
  auto reply = f.daemon_->Post("/release", "short", seconds(10));
  REQUIRE(reply.ok());
  CHECK(Contains(reply->body, "the token file holds no usable token"));
  CHECK(Contains(f.daemon_->log(), "the token is too short"));
  CHECK(Contains(f.daemon_->log(), "openssl rand -hex 32"));
  // An empty file says so; a good token turns the POSTs on again.
  ReplaceFile(f.token_path_, "\n");
  REQUIRE(WaitFor([&] { return Contains(f.daemon_->log(), "is empty: it holds no token"); }));
  CHECK(f.PostStatus(kToken) == 403);
  ReplaceFile(f.token_path_, std::string(kOtherToken) + "\n");
  REQUIRE(WaitFor([&] { return f.PostStatus(kOtherToken) == 200; }));
}

// ---------- 5. the users file's mode, owner and kind ----------

TEST_CASE("The users file's mode, owner and a symlink in its place: woken, reported, repaired",
          "[faults][daemon][integration][server]") {
  Healing f;
  f.WaitConverged();
  REQUIRE(UsersFileAsOwned(f.users_file()));
  const std::string users = f.users_file();
  const std::string rendered = ReadFile(users);
  // Held: the watcher's pass reports the drift and repairs nothing, which shows that the change
  // woke a pass (the interval is an hour) and what it found. Released: repaired.
  auto hold = [&] { REQUIRE(f.daemon_->Post("/hold?for=10m", kToken).ok()); };
  auto release_and_wait_repaired = [&] {
    REQUIRE(f.PostStatus(kToken) == 200);
    INFO(f.daemon_->log());
    REQUIRE(WaitFor([&] { return UsersFileAsOwned(users); }));
    CHECK(ReadFile(users) == rendered);
    f.WaitConverged();
  };
  auto wait_reported = [&](const std::string& found) {
    std::string drift;
    const bool reported = WaitFor([&] {
      drift = f.Drift();
      return Contains(drift, found);
    });
    INFO(drift);
    REQUIRE(reported);
  };

  SECTION("chmod 644") {
    hold();
    REQUIRE(chmod(users.c_str(), 0644) == 0);
    wait_reported("\"0644\"");
    CHECK((LinkStat(users).st_mode & 07777) == 0644);  // held: left alone
    release_and_wait_repaired();
  }
  SECTION("chown to another uid") {
    hold();
    REQUIRE(chown(users.c_str(), geteuid() + 4242, static_cast<gid_t>(-1)) == 0);
    wait_reported("\"uid " + std::to_string(geteuid() + 4242) + "\"");
    release_and_wait_repaired();
  }
  SECTION("a symbolic link to a world-readable file elsewhere") {
    const std::string elsewhere_dir = mesh::testing::MakeTempDir("mesh-heal-elsewhere");
    const std::string elsewhere = elsewhere_dir + "/users.conf";
    WriteFile(elsewhere, rendered);
    REQUIRE(chmod(elsewhere.c_str(), 0644) == 0);
    hold();
    const std::string link = users + ".link";
    REQUIRE(symlink(elsewhere.c_str(), link.c_str()) == 0);
    std::filesystem::rename(link, users);
    wait_reported("symbolic link");
    release_and_wait_repaired();
    CHECK(S_ISREG(LinkStat(users).st_mode));
    CHECK(ReadFile(elsewhere) == rendered);  // the other file is not ours: left as it was
    std::filesystem::remove_all(elsewhere_dir);
  }
}

// ---------- 1. the users file repaired while the server is down or refuses us ----------

TEST_CASE("A broken or deleted users file while nats-server is down is repaired first",
          "[faults][daemon][integration][server]") {
  Healing f;
  f.WaitConverged();
  const std::string users = f.users_file();
  const std::string rendered = ReadFile(users);
  f.mesh_.server->Stop();

  SECTION("garbage") {
    ReplaceFile(users, "garbage {{{\n");
  }
  SECTION("deleted") {
    std::filesystem::remove(users);
  }

  // The server cannot be observed, yet the daemon rewrites the file: the change wakes a pass
  // (or the forced one does it); its reload fails, there is no server.
  Result<PassReport> report = f.Reconcile();
  INFO(f.daemon_->log());
  REQUIRE(report.ok());
  CHECK_FALSE(report->status.ok());
  REQUIRE(WaitFor([&] { return std::filesystem::exists(users) && ReadFile(users) == rendered; }));
  CHECK(UsersFileAsOwned(users));
  CHECK(Contains(f.daemon_->log(), "the bus cannot be observed; repairing the users file"));
  // The server starts with that file (with the broken one it could not), and the daemon
  // converges on it.
  f.mesh_.server->Restart();
  f.WaitConverged();
}

TEST_CASE("A rotated reconciler password is written to the users file although the bus refuses it",
          "[faults][daemon][integration][server]") {
  // The server knows the old password (the mesh's users file); the daemon starts with a new one.
  Healing f("test-only-rotated-reconciler-password");
  const std::string old_file = ReadFile(f.users_file());
  f.WaitConverged();
  CHECK(ReadFile(f.users_file()) != old_file);
  CHECK(Contains(f.daemon_->log(), "Authorization Violation"));
  CHECK_FALSE(Contains(f.daemon_->log(), "test-only-rotated-reconciler-password"));
}

}  // namespace
}  // namespace mesh::reconciler::test
