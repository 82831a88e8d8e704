// Apply: the atomic users-file write, the reload and its confirmation, and the JetStream API
// actions with their outcomes (done / refused / failed / skipped), against a real nats-server
// where the behaviour is the server's.
#include "reconciler/apply/apply.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "observers/jetstream.h"
#include "observers/monitor.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/pass_fixtures.h"
#include "tests/support/temp_dir.h"

namespace mesh::reconciler {
namespace {

namespace fs = std::filesystem;
using mesh::testing::NatsServer;
using mesh::testing::ReadFile;
using mesh::testing::TempDir;
using mesh::testing::WaitFor;
using mesh::testing::WriteFile;

// The names in folder `path`, sorted.
std::vector<std::string> Entries(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

int64_t LoadTime(const NatsServer& server) {
  return observers::ObserveServer(server.monitor_url(), std::chrono::seconds(2))
      .config_load_time_unix_ns;
}

Action WriteUsers(const std::string& path, const std::string& bytes) {
  Action action;
  action.kind = ActionKind::kWriteUsersFile;
  action.name = path;
  action.users_file_bytes = bytes;
  return action;
}

model::StreamSpec TestStream(const std::string& name, const std::string& subject) {
  model::StreamSpec spec;
  spec.name = StreamName(name);
  spec.subjects = {subject};
  spec.retention = model::Retention::kWorkQueue;
  spec.description = model::OwnershipMark("apply-test");
  return spec;
}

model::ConsumerSpec TestConsumer(const std::string& stream, const std::string& durable) {
  model::ConsumerSpec spec;
  spec.stream = StreamName(stream);
  spec.durable = ConsumerName(durable);
  spec.deliver_subject = "mesh.in.test." + durable;
  spec.max_deliver = 10;
  return spec;
}

Action StreamAction(ActionKind kind, const model::StreamSpec& spec) {
  Action action;
  action.kind = kind;
  action.name = spec.name.str();
  action.stream = spec;
  action.target_stream = kind == ActionKind::kDeleteStream ? spec.name : StreamName();
  if (kind == ActionKind::kDeleteStream) action.stream.reset();
  return action;
}

Action ConsumerAction(ActionKind kind, const model::ConsumerSpec& spec) {
  Action action;
  action.kind = kind;
  action.name = spec.stream.str() + "/" + spec.durable.str();
  if (kind == ActionKind::kDeleteConsumer) {
    action.target_stream = spec.stream;
    action.target_consumer = spec.durable;
  } else {
    action.consumer = spec;
  }
  return action;
}

std::vector<Outcome> Outcomes(const std::vector<ActionOutcome>& outcomes) {
  std::vector<Outcome> out;
  for (const auto& o : outcomes) out.push_back(o.outcome);
  return out;
}

// ---------- the users file on disk ----------

TEST_CASE("WriteFileAtomically writes a whole new file, mode 0600, leaving no temporary",
          "[apply]") {
  TempDir dir("mesh-apply");
  const std::string path = dir.path + "/users.conf";
  REQUIRE(WriteFileAtomically(path, "first\n").ok());
  CHECK(ReadFile(path) == "first\n");
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));

  // Replacing an existing (world-readable) file: new bytes, new mode, same single entry.
  chmod(path.c_str(), 0644);
  const std::string big(1 << 20, 'x');
  REQUIRE(WriteFileAtomically(path, big).ok());
  CHECK(ReadFile(path) == big);
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(Entries(dir.path) == std::vector<std::string>{"users.conf"});
}

TEST_CASE("WriteFileAtomically failing leaves the old file intact and removes the temporary",
          "[apply]") {
  TempDir dir("mesh-apply");
  SECTION("the target cannot be replaced (a non-empty folder stands there)") {
    const std::string path = dir.path + "/users.conf";
    fs::create_directory(path);
    WriteFile(path + "/keep", "old");
    Status status = WriteFileAtomically(path, "new bytes");
    CHECK_FALSE(status.ok());
    CHECK(status.code() == Errc::kIo);
    CHECK(status.message().find(path) != std::string::npos);
    CHECK(ReadFile(path + "/keep") == "old");
    CHECK(Entries(dir.path) == std::vector<std::string>{"users.conf"});
  }
  SECTION("the folder does not exist") {
    Status status = WriteFileAtomically(dir.path + "/absent/users.conf", "new bytes");
    CHECK(status.code() == Errc::kIo);
    CHECK(Entries(dir.path).empty());
  }
}

// ---------- signalling the server ----------

TEST_CASE("SignalReload refuses an absent or garbage pid file and a dead process", "[apply]") {
  TempDir dir("mesh-apply");
  const std::string pid_file = dir.path + "/nats.pid";

  CHECK(SignalReload(pid_file).status.message().find("cannot read pid file") != std::string::npos);
  // A FIFO in its place is refused at once, never waited on.
  REQUIRE(mkfifo(pid_file.c_str(), 0600) == 0);
  CHECK(SignalReload(pid_file).status.message().find("is not a regular file") != std::string::npos);
  std::filesystem::remove(pid_file);
  for (const char* garbage : {"", "abc", "12abc", "-5", "0", "1", "99999999999999"}) {
    WriteFile(pid_file, garbage);
    INFO("pid file holds \"" << garbage << "\"");
    const ReloadSignal sent = SignalReload(pid_file);
    CHECK_FALSE(sent.status.ok());
    CHECK(sent.status.message().find("holds no pid") != std::string::npos);
    CHECK(sent.refusal == SignalRefusal::kNone);
  }

  pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  REQUIRE(waitpid(child, nullptr, 0) == child);
  WriteFile(pid_file, std::to_string(child) + "\n");
  const ReloadSignal dead = SignalReload(pid_file);
  CHECK(dead.status.code() == Errc::kUnavailable);
  CHECK(dead.refusal == SignalRefusal::kStale);
  CHECK(dead.pid == child);
  CHECK(dead.status.message().find("pid " + std::to_string(child) + " is not running") !=
        std::string::npos);
}

TEST_CASE("CheckServerProcess: only a running nats-server other than this process", "[apply]") {
  observers::ProcessInfo p;
  p.pid = 4242;
  std::string why;
  p.program = "nats-server";
  CHECK(CheckServerProcess(p, 1000, &why) == SignalRefusal::kNone);
  p.program = "/usr/sbin/nats-server";  // never a path: ReadProcess gives the file name
  p.exe_name = "nats-server";
  CHECK(CheckServerProcess(p, 1000, &why) == SignalRefusal::kNone);  // the binary's own name
  p.program = "sleep";
  p.exe_name = "sleep";
  CHECK(CheckServerProcess(p, 1000, &why) == SignalRefusal::kForeign);
  CHECK(why == "pid 4242 is 'sleep', not nats-server (a stale pid file whose PID was reused)");
  p.program = "";
  p.exe_name = "";
  CHECK(CheckServerProcess(p, 1000, &why) == SignalRefusal::kForeign);
  CHECK(why.find("an unnamed process") != std::string::npos);
  p.program = "nats-server";
  CHECK(CheckServerProcess(p, 4242, &why) == SignalRefusal::kForeign);  // ourselves
  CHECK(why.find("is this process") != std::string::npos);
  p.state = observers::ProcessState::kZombie;
  CHECK(CheckServerProcess(p, 1000, &why) == SignalRefusal::kStale);
}

// A child that runs `program` (a copy of sleep under the name given), in a folder of the test.
pid_t StartSleeper(const std::string& folder, const std::string& name) {
  const std::string program = folder + "/" + name;
  std::filesystem::copy_file("/bin/sleep", program,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(program, std::filesystem::perms::owner_all);
  const pid_t child = fork();
  if (child == 0) {
    signal(SIGHUP, SIG_DFL);
    execl(program.c_str(), program.c_str(), "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  return child;
}

// Waits until `pid` runs `name` (after the exec), or the deadline.
bool WaitRuns(pid_t pid, const std::string& name) {
  return WaitFor([&] {
    Result<observers::ProcessInfo> info = observers::ReadProcess(pid);
    return info.ok() && info->program == name;
  });
}

TEST_CASE("SignalReload sends SIGHUP to a nats-server, and to nothing else the pid file names",
          "[apply]") {
  TempDir dir("mesh-apply");
  const std::string pid_file = dir.path + "/nats.pid";

  // A PID reused by another program: never signalled, whatever the pid file says.
  const pid_t foreign = StartSleeper(dir.path, "sleep");
  REQUIRE(foreign > 0);
  REQUIRE(WaitRuns(foreign, "sleep"));
  WriteFile(pid_file, std::to_string(foreign) + "\n");
  const ReloadSignal refused = SignalReload(pid_file);
  CHECK(refused.status.code() == Errc::kRefused);
  CHECK(refused.refusal == SignalRefusal::kForeign);
  CHECK(refused.pid == foreign);
  CHECK(refused.status.message() == "not signalled: " + pid_file + " names pid " +
                                        std::to_string(foreign) +
                                        " is 'sleep', not nats-server (a stale pid file whose "
                                        "PID was reused)");
  // Still running: nothing was sent.
  int status = 0;
  CHECK(waitpid(foreign, &status, WNOHANG) == 0);
  kill(foreign, SIGKILL);
  REQUIRE(waitpid(foreign, &status, 0) == foreign);
  CHECK(WTERMSIG(status) == SIGKILL);

  // This very process (in a pod's shared PID namespace, the sidecar's own PID).
  WriteFile(pid_file, std::to_string(getpid()) + "\n");
  const ReloadSignal self = SignalReload(pid_file);
  CHECK(self.refusal == SignalRefusal::kForeign);
  CHECK(self.status.message().find("is this process") != std::string::npos);

  // A program named nats-server is signalled.
  const pid_t server = StartSleeper(dir.path, "nats-server");
  REQUIRE(server > 0);
  REQUIRE(WaitRuns(server, "nats-server"));
  WriteFile(pid_file, std::to_string(server) + "\n");
  const ReloadSignal sent = SignalReload(pid_file);
  CHECK(sent.status.ok());
  CHECK(sent.pid == server);
  REQUIRE(waitpid(server, &status, 0) == server);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGHUP);
}

TEST_CASE("ConfirmReload never assumes: an unreachable monitor is a failure", "[apply]") {
  const std::string nowhere = "http://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  Status status = ConfirmReload(nowhere, 0, std::chrono::milliseconds(300));
  CHECK(status.code() == Errc::kUnavailable);
  CHECK(status.message() == "reload not confirmed: monitor unreachable");
}

// ---------- apply without a server ----------

// The deletions of the CLI's delete-stream and delete-consumer go through Apply too, which
// then holds the check the CLI made: a deletion counts only when the server confirms it.
TEST_CASE("OutcomeOf: no answer fails, an error is refused, a deletion needs its confirmation",
          "[apply]") {
  Action create = StreamAction(ActionKind::kCreateStream, TestStream("A", "t.a.*"));
  Action remove;
  remove.kind = ActionKind::kDeleteStream;
  remove.target_stream = StreamName(std::string("A"));

  ActionOutcome timeout = OutcomeOf(create, {Status(Errc::kTimeout, "no reply"), ""});
  CHECK(timeout.outcome == Outcome::kFailed);
  CHECK(timeout.detail == "timeout: no reply");

  ActionOutcome refused = OutcomeOf(
      remove,
      {Status::Ok(), R"({"type":"io.nats.jetstream.api.v1.stream_delete_response",)"
                     R"("error":{"code":404,"err_code":10059,"description":"stream not found"}})"});
  CHECK(refused.outcome == Outcome::kRefused);
  CHECK(refused.err_code == 10059);
  CHECK(refused.detail == "stream not found");

  CHECK(OutcomeOf(remove, {Status::Ok(), R"({"success":true})"}).outcome == Outcome::kDone);
  for (const char* unconfirmed : {R"({"success":false})", "{}", "not json"}) {
    INFO(unconfirmed);
    ActionOutcome o = OutcomeOf(remove, {Status::Ok(), unconfirmed});
    CHECK(o.outcome == Outcome::kFailed);
    CHECK(o.detail == "the server did not confirm the deletion");
  }
  // A creation answers with the stream's info, which has no "success".
  CHECK(OutcomeOf(create, {Status::Ok(), R"({"config":{"name":"A"}})"}).outcome == Outcome::kDone);
}

TEST_CASE("Apply without a bus: API actions fail, consumers of an uncreated stream are skipped",
          "[apply]") {
  const model::StreamSpec stream = TestStream("S1", "t.s1.>");
  std::vector<Action> actions = {
      StreamAction(ActionKind::kCreateStream, stream),
      ConsumerAction(ActionKind::kCreateConsumer, TestConsumer("S1", "c1")),
      ConsumerAction(ActionKind::kCreateConsumer, TestConsumer("S2", "c2")),
  };
  std::vector<ActionOutcome> outcomes = Apply(actions, ApplyTargets{});
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0].action.name == "S1");
  CHECK(outcomes[0].outcome == Outcome::kFailed);
  CHECK(outcomes[0].detail == "not sent: not connected to the bus");
  CHECK(outcomes[1].action.name == "S2/c2");
  CHECK(outcomes[1].outcome == Outcome::kFailed);
  CHECK(outcomes[2].action.name == "S1/c1");
  CHECK(outcomes[2].outcome == Outcome::kSkipped);
  CHECK(outcomes[2].detail == "stream S1 could not be created");
}

TEST_CASE("Apply writes the users file, and without --pid-file skips the reload",
          "[apply][server]") {
  TempDir dir("mesh-apply");
  ApplyTargets targets;
  targets.users_file_path = dir.path + "/users.conf";
  std::vector<ActionOutcome> outcomes =
      Apply({WriteUsers(targets.users_file_path, "accounts {}\n")}, targets);
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].action.kind == ActionKind::kWriteUsersFile);
  CHECK(outcomes[0].outcome == Outcome::kDone);
  CHECK(outcomes[1].action.kind == ActionKind::kReloadServer);
  CHECK(outcomes[1].outcome == Outcome::kSkipped);
  CHECK(outcomes[1].detail.find("not requested") != std::string::npos);
  CHECK(ReadFile(targets.users_file_path) == "accounts {}\n");

  SECTION("a failed write skips the reload") {
    targets.users_file_path = dir.path + "/absent/users.conf";
    outcomes = Apply({WriteUsers(targets.users_file_path, "x")}, targets);
    REQUIRE(outcomes.size() == 1);
    CHECK(outcomes[0].outcome == Outcome::kFailed);
  }
}

// ---------- against a real nats-server ----------

struct Server {
  std::unique_ptr<NatsServer> server;
  std::unique_ptr<observers::BusConnection> bus;

  Server() {
    mesh::testing::NatsServerOptions options;
    options.users_conf = mesh::testing::ReconcilerUsersConf();
    server = NatsServer::Start(options);
    auto connected = observers::BusConnection::Connect(mesh::testing::BusSettingsFor(*server));
    REQUIRE(connected.ok());
    bus = std::move(*connected);
  }

  ApplyTargets Targets() const {
    ApplyTargets targets;
    targets.bus = bus.get();
    targets.users_file_path = server->users_file();
    targets.pid_file = server->pid_file();
    targets.monitor_url = server->monitor_url();
    return targets;
  }

  observers::ObservedJetStream Observe() const {
    auto observed = observers::ObserveJetStream(*bus);
    REQUIRE(observed.ok());
    return std::move(*observed);
  }
};

TEST_CASE("ConfirmReload waits for the server's load time to move",
          "[apply][integration][server]") {
  Server s;
  const int64_t before = LoadTime(*s.server);
  REQUIRE(before > 0);
  Status early = ConfirmReload(s.server->monitor_url(), before, std::chrono::milliseconds(300));
  CHECK(early.code() == Errc::kTimeout);
  CHECK(early.message().find("reload not confirmed") != std::string::npos);
  REQUIRE(SignalReload(s.server->pid_file()).status.ok());
  CHECK(ConfirmReload(s.server->monitor_url(), before, std::chrono::seconds(10)).ok());
  CHECK(LoadTime(*s.server) > before);
}

TEST_CASE("Apply rewrites the users file and confirms the reload", "[apply][integration][server]") {
  Server s;
  const int64_t before = LoadTime(*s.server);
  // The same users with one more: the new user can connect only once the reload happened.
  std::string conf = mesh::testing::ReconcilerUsersConf();
  conf.insert(conf.find("{ user: \"admin\""), "{ user: \"late\", password: \"late-pw\" }\n      ");
  std::vector<ActionOutcome> outcomes =
      Apply({WriteUsers(s.server->users_file(), conf)}, s.Targets());
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].outcome == Outcome::kDone);
  CHECK(outcomes[1].outcome == Outcome::kDone);
  CHECK(outcomes[1].detail ==
        "reload confirmed (SIGHUP to nats-server pid " + std::to_string(s.server->pid()) + ")");
  CHECK(LoadTime(*s.server) > before);
  CHECK(
      observers::BusConnection::Connect(mesh::testing::BusSettingsFor(*s.server, "late", "late-pw"))
          .ok());

  SECTION("pid file but no monitor: signalled, not confirmed, so failed") {
    ApplyTargets targets = s.Targets();
    targets.monitor_url.clear();
    outcomes = Apply({WriteUsers(s.server->users_file(), conf)}, targets);
    REQUIRE(outcomes.size() == 2);
    CHECK(outcomes[0].outcome == Outcome::kDone);
    CHECK(outcomes[1].outcome == Outcome::kFailed);
    CHECK(outcomes[1].detail ==
          "reload requested, not confirmed: no --monitor configured "
          "(SIGHUP to nats-server pid " +
              std::to_string(s.server->pid()) + ")");
  }
}

TEST_CASE("A reload the server rejects is reported as failed, the server keeping its users",
          "[apply][integration][server]") {
  Server s;
  const int64_t before = LoadTime(*s.server);
  ApplyTargets targets = s.Targets();
  targets.reload_timeout = std::chrono::milliseconds(1500);
  std::vector<ActionOutcome> outcomes =
      Apply({WriteUsers(s.server->users_file(), "accounts { MESH { users: [ { user: \n")}, targets);
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[0].outcome == Outcome::kDone);
  CHECK(outcomes[1].outcome == Outcome::kFailed);
  CHECK(outcomes[1].detail.find("reload not confirmed") != std::string::npos);
  CHECK(s.server->running());
  CHECK(LoadTime(*s.server) == before);
  // The old configuration is still in force.
  CHECK(observers::BusConnection::Connect(mesh::testing::BusSettingsFor(*s.server)).ok());

  // A good file afterwards is loaded and confirmed.
  outcomes =
      Apply({WriteUsers(s.server->users_file(), mesh::testing::ReconcilerUsersConf())}, targets);
  REQUIRE(outcomes.size() == 2);
  CHECK(outcomes[1].outcome == Outcome::kDone);
}

TEST_CASE("Apply creates, updates and deletes streams and consumers",
          "[apply][integration][server]") {
  Server s;
  model::StreamSpec a = TestStream("A", "t.a.*");
  model::StreamSpec b = TestStream("B", "t.b.*");
  model::ConsumerSpec a1 = TestConsumer("A", "a1");
  a1.filter_subject = "t.a.one";  // a work queue takes several consumers only when filtered
  model::ConsumerSpec a2 = TestConsumer("A", "a2");
  a2.filter_subject = "t.a.two";
  model::ConsumerSpec b1 = TestConsumer("B", "b1");
  std::vector<ActionOutcome> outcomes =
      Apply({StreamAction(ActionKind::kCreateStream, a), StreamAction(ActionKind::kCreateStream, b),
             ConsumerAction(ActionKind::kCreateConsumer, a1),
             ConsumerAction(ActionKind::kCreateConsumer, a2),
             ConsumerAction(ActionKind::kCreateConsumer, b1)},
            s.Targets());
  CHECK(Outcomes(outcomes) == std::vector<Outcome>(5, Outcome::kDone));
  observers::ObservedJetStream observed = s.Observe();
  REQUIRE(observed.streams.size() == 2);
  CHECK(observed.streams[0].config == a);
  CHECK(observed.streams[1].config == b);
  REQUIRE(observed.consumers.size() == 3);
  CHECK(observed.consumers[0].config == a1);
  CHECK(observed.consumers[1].config == a2);
  CHECK(observed.consumers[2].config == b1);

  // Updates in place: subjects and max age; the consumer's deliver subject and max deliver.
  // Deleting B deletes b1 with it.
  a.subjects = {"t.a.*", "t.a2.*"};
  a.max_age_ns = 3600 * model::kNanosPerSecond;
  a1.deliver_subject = "mesh.in.test.moved";
  a1.max_deliver = 3;
  outcomes = Apply(
      {StreamAction(ActionKind::kUpdateStream, a), ConsumerAction(ActionKind::kUpdateConsumer, a1),
       ConsumerAction(ActionKind::kDeleteConsumer, a2), StreamAction(ActionKind::kDeleteStream, b)},
      s.Targets());
  CHECK(Outcomes(outcomes) == std::vector<Outcome>(4, Outcome::kDone));
  // Streams first, whatever the order given.
  CHECK(outcomes[0].action.kind == ActionKind::kUpdateStream);
  CHECK(outcomes[1].action.kind == ActionKind::kDeleteStream);
  observed = s.Observe();
  REQUIRE(observed.streams.size() == 1);
  CHECK(observed.streams[0].config == a);
  REQUIRE(observed.consumers.size() == 1);
  CHECK(observed.consumers[0].config == a1);
}

TEST_CASE("Apply reports the server's refusals with their error codes",
          "[apply][integration][server]") {
  Server s;
  model::StreamSpec a = TestStream("A", "t.a.*");
  REQUIRE(Outcomes(Apply({StreamAction(ActionKind::kCreateStream, a)}, s.Targets())) ==
          std::vector<Outcome>{Outcome::kDone});

  // A stream whose subjects overlap A's, and a consumer on it: refused, then skipped.
  model::StreamSpec clash = TestStream("CLASH", "t.a.x");
  // Retention cannot change in place.
  model::StreamSpec a_limits = a;
  a_limits.retention = model::Retention::kLimits;
  std::vector<ActionOutcome> outcomes =
      Apply({StreamAction(ActionKind::kCreateStream, clash),
             StreamAction(ActionKind::kUpdateStream, a_limits),
             ConsumerAction(ActionKind::kCreateConsumer, TestConsumer("CLASH", "c"))},
            s.Targets());
  REQUIRE(outcomes.size() == 3);
  CHECK(outcomes[0].outcome == Outcome::kRefused);
  CHECK(outcomes[0].err_code == 10065);  // subjects overlap
  CHECK_FALSE(outcomes[0].detail.empty());
  CHECK(outcomes[1].outcome == Outcome::kRefused);
  CHECK(outcomes[1].err_code == 10052);
  CHECK(outcomes[2].outcome == Outcome::kSkipped);

  // Deleting what is not there.
  outcomes =
      Apply({ConsumerAction(ActionKind::kDeleteConsumer, TestConsumer("A", "none"))}, s.Targets());
  REQUIRE(outcomes.size() == 1);
  CHECK(outcomes[0].outcome == Outcome::kRefused);
  CHECK(outcomes[0].err_code == 10014);  // consumer not found
}

TEST_CASE("Apply with the server gone: the actions fail, they are not assumed",
          "[apply][integration][server]") {
  Server s;
  s.server->Stop();
  std::vector<ActionOutcome> outcomes =
      Apply({StreamAction(ActionKind::kCreateStream, TestStream("A", "t.a.*"))}, s.Targets());
  REQUIRE(outcomes.size() == 1);
  CHECK(outcomes[0].outcome == Outcome::kFailed);
  CHECK_FALSE(outcomes[0].detail.empty());
}

// Apply sends in chunks (so that thousands of replies are never held at once): across chunk
// boundaries every action is sent once, its outcome stays beside it, in order, and consumers
// follow their streams even when the streams filled several chunks.
TEST_CASE("Apply of more actions than one chunk creates each object once, in order",
          "[apply][integration][server]") {
  constexpr int kStreams = 600;  // more than two chunks of streams, then of consumers
  Server s;
  std::vector<Action> actions;
  for (int i = 0; i < kStreams; ++i) {
    const std::string name = "S" + std::to_string(i);
    actions.push_back(StreamAction(ActionKind::kCreateStream, TestStream(name, "t." + name)));
  }
  for (int i = 0; i < kStreams; ++i) {
    actions.push_back(
        ConsumerAction(ActionKind::kCreateConsumer, TestConsumer("S" + std::to_string(i), "c")));
  }
  const std::vector<ActionOutcome> outcomes = Apply(actions, s.Targets());
  REQUIRE(outcomes.size() == actions.size());
  for (size_t i = 0; i < actions.size(); ++i) {
    INFO(i << ": " << outcomes[i].action.name << ": " << outcomes[i].detail);
    REQUIRE(outcomes[i].outcome == Outcome::kDone);
    REQUIRE(outcomes[i].action.kind == actions[i].kind);
    REQUIRE(outcomes[i].action.name == actions[i].name);
  }
  const observers::ObservedJetStream observed = s.Observe();
  CHECK(observed.streams.size() == static_cast<size_t>(kStreams));
  CHECK(observed.consumers.size() == static_cast<size_t>(kStreams));
}

TEST_CASE("Apply stops in the middle when the chunk gate says the lease lapsed",
          "[apply][integration][lease][server]") {
  constexpr int kStreams = 600;  // three chunks of streams
  Server s;
  std::vector<Action> actions;
  for (int i = 0; i < kStreams; ++i) {
    const std::string name = "F" + std::to_string(i);
    actions.push_back(StreamAction(ActionKind::kCreateStream, TestStream(name, "f." + name)));
    actions.push_back(ConsumerAction(ActionKind::kCreateConsumer, TestConsumer(name, "c")));
  }
  ApplyTargets targets = s.Targets();
  int asked = 0;
  targets.before_chunk = [&]() -> ChunkDecision {
    ++asked;
    if (asked == 1) return {};
    return {ChunkVerdict::kStop, "this instance no longer holds the lease (standby)"};
  };
  const std::vector<ActionOutcome> outcomes = Apply(actions, targets);
  REQUIRE(outcomes.size() == actions.size());
  size_t done = 0, skipped = 0;
  for (const ActionOutcome& o : outcomes) {
    if (o.outcome == Outcome::kDone) ++done;
    if (o.outcome == Outcome::kSkipped) ++skipped;
  }
  CHECK(done == 256);  // the first chunk only, all streams
  CHECK(skipped == actions.size() - 256);
  CHECK(outcomes[256].detail == "not sent: this instance no longer holds the lease (standby)");
  // Once for the second stream chunk, once for the consumers: nothing else was sent.
  CHECK(asked == 3);
  const observers::ObservedJetStream observed = s.Observe();
  CHECK(observed.streams.size() == 256);
  CHECK(observed.consumers.empty());
}

}  // namespace
}  // namespace mesh::reconciler
