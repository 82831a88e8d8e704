// The daemon end to end: the real binary (`mesh-reconciler run`) against a real nats-server,
// scraped by a real Prometheus, driven by the on-call CLI. Every process is stopped by PID.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "bench/support/mesh_gen.h"
#include "observers/bus.h"
#include "observers/server_version.h"
#include "reconciler/cli/settings.h"
#include "reconciler/pass/pass.h"
#include "tests/support/daemon_support.h"
#include "tests/support/nats_client.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler::test {
namespace {

using mesh::testing::WaitFor;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kAdminToken[] = "daemon-test-admin-token-5f0c8e2a9b7d41";
constexpr char kRotatedToken[] = "daemon-test-rotated-token-b41e7c93d05a";
constexpr auto kRepairDeadline = seconds(20);
constexpr auto kShutdownDeadline = seconds(5);

const std::vector<std::string> kExampleStreams = {
    "CONTROL",          "DECL",        "EVENTS",          "SEAT_invoicer",
    "SEAT_ledger",      "SEAT_intake", "SEAT_mesh-build", "SEAT_mesh-notify",
    "SEAT_mesh-archive"};

// Replaces `path` atomically, as an operator or a ConfigMap update would.
void ReplaceFile(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".new";
  mesh::testing::WriteFile(temporary, bytes);
  std::filesystem::rename(temporary, path);
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

// The example records with one more role, "mesh-extra" (a stream SEAT_mesh-extra).
std::string RecordsWithExtraRole() {
  return Replace(ExampleRecordsJson(), "\"roles\": [",
                 "\"roles\": [\n    { \"name\": \"mesh-extra\", \"accepts\": [\"x\"], "
                 "\"emits\": [], \"holders\": [] },");
}

// Deletes a stream through the JetStream API, which must answer success.
void DeleteStreamOn(observers::BusConnection& bus, const std::string& name) {
  observers::ApiReply reply = bus.Request({"$JS.API.STREAM.DELETE." + name, ""});
  INFO(reply.status.ToString() << " " << reply.payload);
  REQUIRE(reply.status.ok());
  REQUIRE(reply.payload.find("\"success\":true") != std::string::npos);
}

enum class Launch { kNow, kLater };

// A live mesh, the daemon running against it, and an admin connection to the bus (as the
// reconciler's own user, which may use the whole JetStream API) to break things with.
class DaemonFixture {
 public:
  // `server_config` goes into the server's main configuration (LiveMesh).
  explicit DaemonFixture(const std::string& records_json, std::vector<std::string> extra = {},
                         Launch launch = Launch::kNow, const std::string& server_config = "")
      : mesh_(records_json, server_config), extra_(std::move(extra)) {
    token_path_ = mesh_.dir + "/admin.token";
    mesh::testing::WriteFile(token_path_, std::string(kAdminToken) + "\n");
    // 0600, as a deployment keeps it (readable by others, the daemon and the CLI warn).
    std::filesystem::permissions(
        token_path_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    if (launch == Launch::kNow) StartDaemon();
  }

  void StartDaemon() {
    const Settings s = mesh_.PassSettings();
    std::vector<std::string> args = {"--records",     s.records_path,
                                     "--bus",         s.bus.urls[0],
                                     "--user",        s.bus.user,
                                     "--users-file",  s.users_file,
                                     "--pid-file",    s.pid_file,
                                     "--monitor",     s.monitor_url,
                                     "--bcrypt-cost", std::to_string(kCheapCost),
                                     "--token-file",  token_path_,
                                     "--interval",    "1h"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    daemon_ = DaemonProcess::Start(args, env_);
  }

  // SIGTERM: the daemon must exit 0 within a few seconds.
  void Stop() {
    INFO(daemon_->log());
    const auto start = std::chrono::steady_clock::now();
    std::optional<int> code = daemon_->Terminate(kShutdownDeadline);
    REQUIRE(code.has_value());
    CHECK(*code == 0);
    CHECK(std::chrono::steady_clock::now() - start < kShutdownDeadline);
  }

  observers::BusConnection& Bus() {
    if (!bus_) {
      auto connected = observers::BusConnection::Connect(mesh_.PassSettings().bus);
      INFO(connected.status().ToString());
      REQUIRE(connected.ok());
      bus_ = std::move(*connected);
    }
    return *bus_;
  }
  bool StreamExists(const std::string& name) {
    observers::ApiReply reply = Bus().Request({"$JS.API.STREAM.INFO." + name, ""});
    return reply.status.ok() && reply.payload.find("\"error\"") == std::string::npos;
  }
  void DeleteStream(const std::string& name) { DeleteStreamOn(Bus(), name); }

  // POST /reconcile with the admin token: the report of a pass that started after the call.
  Result<PassReport> Reconcile() { return daemon_->Reconcile(kAdminToken); }
  // Until a forced pass reports convergence.
  void WaitConverged() {
    std::string last;
    const bool converged = daemon_->WaitConverged(kAdminToken, seconds(60), last);
    INFO(last);
    INFO(daemon_->log());
    REQUIRE(converged);
  }
  double Metric(const std::string& series) { return daemon_->Metric(series).value_or(-1); }
  std::vector<std::string> Remote(const std::string& command) const {
    return {command, "--remote", daemon_->url(), "--token-file", token_path_};
  }

  LiveMesh mesh_;
  std::vector<std::string> extra_;
  std::vector<std::string> env_ = {std::string("MESH_RECONCILER_PASSWORD=") + kReconcilerPassword};
  std::string token_path_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<observers::BusConnection> bus_;
};

const std::string kStreamsCreated =
    "mesh_reconciler_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"}";
const std::string kStreamsMissing =
    "mesh_reconciler_drift_objects{kind=\"stream\",state=\"missing\"}";

TEST_CASE("run refuses a non-loopback listener without a token file", "[daemon]") {
  CliResult result = RunCli({"run", "--records", "/nonexistent/records.json", "--listen",
                             "0.0.0.0:0", "--bus", "nats://127.0.0.1:1"});
  CHECK(result.exit_code == 1);
  CHECK(result.output.find("refusing to listen on 0.0.0.0:0") != std::string::npos);
  CHECK(RunCli({"run", "--listen", "127.0.0.1:0"}).exit_code == 64);  // --records missing
}

// Before, `run` took stray arguments, took "--bus" for the records file in `--records --bus
// URL`, and without --bus retried "no bus address configured" for ever.
TEST_CASE("run refuses stray arguments, a flag for a value and a missing --bus at start",
          "[daemon]") {
  const std::string records = "/nonexistent/records.json";
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"run", "--records", records, "--bus", "nats://127.0.0.1:1", "stray"},
           {"run", "--records", "--bus", "nats://127.0.0.1:1", "--listen", "127.0.0.1:0"},
           {"run", "--records", records, "--listen", "127.0.0.1:0"}}) {
    CliResult result = RunCli(args, std::chrono::seconds(20));  // at start, not after retries
    INFO(result.output);
    CHECK(result.exit_code == 64);
  }
  CHECK(RunCli({"run", "--records", records, "--listen", "127.0.0.1:0"}, std::chrono::seconds(20))
            .output.find("--bus URL is required") != std::string::npos);
}

TEST_CASE("A deleted stream is recreated at once, without waiting for the interval",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  for (const auto& stream : kExampleStreams) CHECK(f.StreamExists(stream));
  const double created_before = f.Metric(kStreamsCreated);
  // Woken by the advisory: a repair of the stream alone, and a full pass only if the repair did
  // not settle it.
  auto advisory_passes = [&] {
    return f.daemon_
               ->Metric("mesh_reconciler_passes_total{result=\"success\",trigger=\"advisory\"}")
               .value_or(0) +
           f.daemon_->Metric("mesh_reconciler_passes_total{result=\"success\",trigger=\"repair\"}")
               .value_or(0);
  };
  const double advisory_passes_before = advisory_passes();

  const auto start = std::chrono::steady_clock::now();
  f.DeleteStream("SEAT_ledger");
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_ledger"); }, kRepairDeadline));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < seconds(5));  // the interval is 1 h: only the advisory can explain this
  REQUIRE(WaitFor([&] { return f.Metric(kStreamsCreated) == created_before + 1; }));
  CHECK(advisory_passes() > advisory_passes_before);
  f.WaitConverged();
  CHECK(f.Metric(kStreamsMissing) == 0);
  CHECK(f.Metric("mesh_reconciler_bus_connected") == 1);
  CHECK(f.Metric("mesh_reconciler_records_valid") == 1);
  auto ready = f.daemon_->Get("/readyz");
  REQUIRE(ready.ok());
  CHECK(ready->status == 200);
  // The live exposition, after real passes and repairs, passes promtool too.
  auto metrics = f.daemon_->Get("/metrics");
  REQUIRE(metrics.ok());
  const CliResult checked = Promtool(metrics->body);
  INFO(checked.output);
  CHECK(checked.exit_code == 0);
  CHECK(checked.output.empty());
  f.Stop();
}

// Issue 11: a deletion that came within the advisory floor of the last advisory-woken pass
// waited for the floor, then for a whole pass of the account. The stream is now repaired at
// once, alone (a repair pass). Issue 39: a repair that settles its stream wakes no full pass,
// which the loop's tests show; here the repairs on a real server.
TEST_CASE("A deleted stream is repaired at once, alone, whatever the advisory floor",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson(), {"--advisory-floor", "1m"});
  f.WaitConverged();
  f.DeleteStream("SEAT_ledger");
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_ledger"); }, kRepairDeadline));
  const auto start = std::chrono::steady_clock::now();
  f.DeleteStream("DECL");
  REQUIRE(WaitFor([&] { return f.StreamExists("DECL"); }, kRepairDeadline));
  CHECK(std::chrono::steady_clock::now() - start < seconds(10));  // the floor is 1 min
  // The stream exists before its repair pass has finished (its consumers, its re-observation);
  // a repair of SEAT_ledger (its own stream advisory) may have run before it.
  const bool logged = WaitFor([&] {
    return f.daemon_->log().find("msg=\"named streams repaired first\" streams=DECL") !=
           std::string::npos;
  });
  INFO(f.daemon_->log());
  CHECK(logged);
  CHECK(f.daemon_->log().find("msg=\"pass scheduled\" trigger=repair mode=apply streams=DECL") !=
        std::string::npos);
  CHECK(WaitFor([&] {
    return f.Metric("mesh_reconciler_passes_total{result=\"success\",trigger=\"repair\"}") >= 1;
  }));
  // Its consumers came back with it; a forced (full) pass finds nothing left.
  f.WaitConverged();
  f.Stop();
}

// Issue 11 item 4: a durable of the mesh's shape that the records no longer derive (here a node
// that left), created by hand or by a stale controller, is unexpected drift. Its advisory used to
// be ignored like an ephemeral's, so with a 1 h interval nobody heard of it for an hour; a
// server-named ephemeral on an owned stream still wakes nothing.
TEST_CASE("A stale mesh durable created by hand is reported at once, an ephemeral wakes nothing",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  const std::string unexpected =
      "mesh_reconciler_drift_objects{kind=\"consumer\",state=\"unexpected\"}";
  const std::string advisory_passes =
      "mesh_reconciler_passes_total{result=\"success\",trigger=\"advisory\"}";
  REQUIRE(f.Metric(unexpected) == 0);

  const double passes_before = f.Metric(advisory_passes);
  observers::ApiReply ephemeral = f.Bus().Request(
      {"$JS.API.CONSUMER.CREATE.EVENTS",
       R"({"stream_name":"EVENTS","config":{"deliver_subject":"t.eph","ack_policy":"none"}})"});
  REQUIRE(ephemeral.status.ok());
  REQUIRE(ephemeral.payload.find("\"error\"") == std::string::npos);

  const auto start = std::chrono::steady_clock::now();
  observers::ApiReply stale =
      f.Bus().Request({"$JS.API.CONSUMER.DURABLE.CREATE.DECL.decl_node-gone",
                       R"({"stream_name":"DECL","config":{"durable_name":"decl_node-gone",)"
                       R"("deliver_subject":"mesh.in.node-gone.decl","ack_policy":"explicit",)"
                       R"("filter_subject":"mesh.decl.node-gone"}})"});
  INFO(stale.payload);
  REQUIRE(stale.status.ok());
  REQUIRE(stale.payload.find("\"error\"") == std::string::npos);
  REQUIRE(WaitFor([&] { return f.Metric(unexpected) == 1; }, seconds(10)));
  CHECK(std::chrono::steady_clock::now() - start < seconds(10));  // the interval is 1 h
  // One advisory-woken pass for the durable's advisory; the ephemeral's, before it, woke none
  // (a pass it had woken would have seen no drift and not be told apart here, so count them).
  INFO(f.daemon_->log());
  CHECK(f.Metric(advisory_passes) - passes_before <= 2);
  auto drift = f.daemon_->Get("/drift");
  REQUIRE(drift.ok());
  CHECK(drift->body.find("DECL/decl_node-gone") != std::string::npos);
  f.Stop();
}

// A client's durables on DECL (a workqueue: one filter each): deleting DECL, the server deletes
// them one by one, an advisory each, before it sends DECL's own advisory and removes the folder.
void CreateClientDurables(DaemonFixture& f, int count) {
  std::vector<observers::ApiRequest> creates;
  for (int i = 0; i < count; ++i) {
    const std::string name = "client-" + std::to_string(i);
    creates.push_back({"$JS.API.CONSUMER.DURABLE.CREATE.DECL." + name,
                       R"({"stream_name":"DECL","config":{"durable_name":")" + name +
                           R"(","ack_policy":"explicit","filter_subject":"mesh.decl.)" + name +
                           R"("}})"});
  }
  for (const observers::ApiReply& reply : f.Bus().RequestMany(creates)) {
    INFO(reply.status.ToString() << " " << reply.payload);
    REQUIRE(reply.status.ok());
    REQUIRE(reply.payload.find("\"error\"") == std::string::npos);
  }
}

// A connection for deleting DECL while it holds those durables. The server deletes a stream in
// the read loop of the connection that asked (2.9 to 2.11.9: HandlesApiRequestsInPlace), one
// consumer after another, answering nothing on that connection meanwhile, not even a PING: a
// client calling its connection lost within 5 s (cnats' PINGs at a third of the request
// timeout, BusConnection) lost it in the middle of deleting 3,000 durables on a loaded
// machine. A deletion takes what the server needs; this client waits for its answer.
std::unique_ptr<observers::BusConnection> DeletingConnection(DaemonFixture& f) {
  observers::BusSettings settings = f.mesh_.PassSettings().bus;
  settings.request_timeout = seconds(60);
  auto connected = observers::BusConnection::Connect(settings);
  INFO(connected.status().ToString());
  REQUIRE(connected.ok());
  return std::move(*connected);
}

// After DECL was recreated: the controller publishes declarations (conventions:
// mesh.decl.<node>; the server's acknowledgement names the stream that stored each), the daemon
// stops (it must not get a chance to recreate a lost stream and hide the loss) and the server
// restarts. Checks that DECL then holds every acknowledged message (what it holds, the server's
// and the daemon's logs beside a failure) and returns the daemon's log.
std::string CheckAcknowledgedSurviveRestart(DaemonFixture& f) {
  constexpr int kMessages = 20;
  observers::BusSettings controller_bus = f.mesh_.PassSettings().bus;
  controller_bus.user = "mesh-controller";
  controller_bus.password = "demo-only-controller-password";
  auto controller = observers::BusConnection::Connect(controller_bus);
  INFO(controller.status().ToString());
  REQUIRE(controller.ok());
  for (int i = 0; i < kMessages; ++i) {
    observers::ApiReply ack = (*controller)->Request({"mesh.decl.node-a", "m" + std::to_string(i)});
    INFO(ack.status.ToString() << " " << ack.payload);
    REQUIRE(ack.status.ok());
    REQUIRE(ack.payload.find("\"stream\":\"DECL\"") != std::string::npos);
  }
  controller->reset();
  f.Stop();
  f.bus_.reset();
  f.mesh_.server->Restart();
  std::string info;
  const bool all_there = WaitFor(
      [&] {
        observers::ApiReply reply = f.Bus().Request({"$JS.API.STREAM.INFO.DECL", ""});
        info = reply.status.ToString() + " " + reply.payload;
        return reply.status.ok() && reply.payload.find("\"messages\":" + std::to_string(kMessages) +
                                                       ",") != std::string::npos;
      },
      seconds(10));
  INFO(info);
  INFO(mesh::testing::ReadFile(f.mesh_.server->log_file()));
  std::string log = f.daemon_->log();
  INFO(log);
  CHECK(all_there);
  return log;
}

// Issue 11: on 2.9 the server drops a deleted stream from its lists, then deletes its consumers,
// sends the advisory and only then removes the store folder. A stream recreated meanwhile has
// its folder removed under it: what it acknowledges is gone at the next restart. On 2.10 and
// later the daemon waits until /healthz stops naming the old store; on 2.9 it waits until the
// old folders are gone from --store-dir, or without it settles after the last deletion advisory.
TEST_CASE("Streams deleted in a burst are recreated without losing what is acknowledged after",
          "[daemon][integration][server]") {
  // Issue 37 item 5: the folder the server prints at start ("Store Directory": the store_dir's
  // jetstream/) is taken as its parent (before, every recreation settled instead).
  enum class Mount { kStoreDir, kPrintedFolder, kNone };
  const Mount mount = GENERATE(Mount::kStoreDir, Mount::kPrintedFolder, Mount::kNone);
  const bool store_mounted = mount != Mount::kNone;
  INFO((store_mounted ? "with" : "without")
       << " --store-dir" << (mount == Mount::kPrintedFolder ? " (printed)" : ""));
  DaemonFixture f(ExampleRecordsJson(), {}, Launch::kLater);
  if (mount == Mount::kStoreDir) f.extra_ = {"--store-dir", f.mesh_.server->store_dir()};
  if (mount == Mount::kPrintedFolder) {
    f.extra_ = {"--store-dir", f.mesh_.server->store_dir() + "/jetstream"};
  }
  f.StartDaemon();
  f.WaitConverged();
  // As many client durables as the Large mesh's nodes have on DECL, and more. A settle counted
  // from the first advisory ended while they were still being deleted (2 runs of 2 lost DECL).
  CreateClientDurables(f, 3000);
  const std::vector<std::string> burst = {"DECL", "EVENTS", "SEAT_ledger"};
  auto deleter = DeletingConnection(f);
  for (const auto& stream : burst) DeleteStreamOn(*deleter, stream);
  REQUIRE(WaitFor(
      [&] {
        return std::all_of(burst.begin(), burst.end(),
                           [&](const std::string& s) { return f.StreamExists(s); });
      },
      kRepairDeadline));
  f.WaitConverged();
  const std::string log = CheckAcknowledgedSurviveRestart(f);
  INFO(log);
  // How the daemon knew the old stores were gone: 2.10 on name them in /healthz; 2.9 shows
  // nothing, so the folders on disk, or the server's answer to the deletion.
  const bool healthz_shows = observers::HealthzShowsStoresOnDisk(
      observers::ParseServerVersion(mesh::testing::ServerBinaryVersion()),
      observers::Topology::kStandalone);
  if (healthz_shows) {
    // The pass that creates DECL waits until /healthz stops naming its old store (while the
    // server deletes the 3,000 durables), whether its plan found DECL missing or, with the store
    // still named, unrecoverable (then it waits before planning again). Which pass does it is the
    // timing's (a check on one "waited" line failed in CI). What matters is above (all_there)
    // and that none falls back to the folders or a settle.
    CHECK(log.find("how=\"until the old folders") == std::string::npos);
    CHECK(log.find("how=\"a settle") == std::string::npos);
  } else {
    // 2.9 names no store: the only protection is the wait in the creating pass. Without the
    // folders, a settle after the last advisory lost DECL in CI (a loaded machine): the
    // server's answer to the deletion comes once the folder is gone.
    const std::string how = store_mounted
                                ? "how=\"until the old folders are gone from --store-dir\""
                                : "how=\"until the server answered the deletion";
    CHECK(log.find(how) != std::string::npos);
    CHECK(log.find("how=\"a settle") == std::string::npos);
  }
  CHECK(log.find("settling instead") == std::string::npos);
  if (mount == Mount::kPrintedFolder && !healthz_shows) {  // 2.10 on: the folder is not used
    CHECK(log.find("--store-dir is the folder nats-server prints as its Store Directory; using "
                   "its parent") != std::string::npos);
  }
}

// The CI failure of the test above (2.9, no --store-dir, a loaded machine): the settle after
// the last deletion advisory is a guess at how long the server takes to remove the folder, and
// a slow moment of the server outlasts any guess. Here the server is frozen half way through
// deleting DECL's durables, for longer than the settle the daemon would take for them (a second
// and a fifth): what the daemon waits for must be what the server says, not a clock. (On 2.10
// and later the daemon leaves DECL while /healthz names its old store.)
TEST_CASE("A server frozen while it deletes a stream loses nothing of the stream recreated after",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  constexpr int kDurables = 1000;
  CreateClientDurables(f, kDurables);
  std::atomic<int> durables_deleted{0};
  auto watcher = observers::BusConnection::Connect(
      f.mesh_.PassSettings().bus, [&](observers::BusEvent event, const std::string& subject) {
        if (event == observers::BusEvent::kAdvisory &&
            subject.rfind("$JS.EVENT.ADVISORY.CONSUMER.DELETED.DECL.client-", 0) == 0) {
          ++durables_deleted;
        }
      });
  REQUIRE(watcher.ok());
  REQUIRE((*watcher)->SubscribeAdvisories().ok());
  // The deletion is asked on a connection of its own, which waits out the freeze too (its
  // answer comes only once the deletion is over).
  auto deleter = DeletingConnection(f);
  std::future<observers::ApiReply> deleted = std::async(std::launch::async, [&] {
    return deleter->Request({"$JS.API.STREAM.DELETE.DECL", ""});
  });
  const bool half_way = WaitFor([&] { return durables_deleted >= kDurables / 2; });
  int deleted_at_freeze = 0;
  if (half_way) {
    struct Thaw {  // whatever happens below, the server must not stay frozen
      mesh::testing::NatsServer& server;
      ~Thaw() { server.Thaw(); }
    } thaw{*f.mesh_.server};
    f.mesh_.server->Freeze();
    deleted_at_freeze = durables_deleted;
    // The fault's length, not a wait for anything: past the settle, and short of the daemon's
    // connection going stale (cnats' PINGs, a third of its 5 s request timeout apart).
    std::this_thread::sleep_for(milliseconds(2500));
  }
  observers::ApiReply reply = deleted.get();
  INFO(reply.status.ToString() << " " << reply.payload);
  REQUIRE(reply.status.ok());
  REQUIRE(reply.payload.find("\"success\":true") != std::string::npos);
  INFO(f.daemon_->log());
  REQUIRE(half_way);
  CHECK(deleted_at_freeze < kDurables);  // the freeze came before the last of them
  REQUIRE(WaitFor([&] { return f.StreamExists("DECL"); }, kRepairDeadline));
  f.WaitConverged();
  const std::string log = CheckAcknowledgedSurviveRestart(f);
  INFO(log);
  CHECK(log.find("how=\"a settle") == std::string::npos);
}

// The server sends a stream's deletion advisory before it removes the stream's store (with its
// consumers' folders inside), so the repair the advisory wakes can find the store still there:
// the plan then reports the stream unrecoverable (never created over a store) and leaves it.
// Before, nothing woke another pass once the store was gone, and DECL stayed missing until the
// interval (1 h here): seen on 2.15.1 in "Streams deleted in a burst ..." above, where the other
// streams' repairs were named for them alone. Now the pass waits for the store's removal as for
// any recreation, and creates it.
TEST_CASE("A stream whose old store is still being removed is recreated once it is gone",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  CreateClientDurables(f, 3000);  // a store that takes a while to remove
  auto deleter = DeletingConnection(f);
  DeleteStreamOn(*deleter, "DECL");
  const bool back = WaitFor([&] { return f.StreamExists("DECL"); }, kRepairDeadline);
  const std::string log = f.daemon_->log();
  INFO(log);
  REQUIRE(back);
  f.WaitConverged();
  f.Stop();
}

TEST_CASE("After the server is killed and its store wiped, the daemon reconnects and restores",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  f.mesh_.server->Kill();
  f.mesh_.server->WipeStore();
  REQUIRE(WaitFor([&] { return f.Metric("mesh_reconciler_bus_connected") == 0; }));
  f.mesh_.server->Restart();
  const bool restored = WaitFor(
      [&] {
        for (const auto& stream : kExampleStreams) {
          if (!f.StreamExists(stream)) return false;
        }
        return true;
      },
      seconds(60));
  INFO(f.daemon_->log());
  REQUIRE(restored);
  REQUIRE(WaitFor([&] { return f.Metric("mesh_reconciler_bus_connected") == 1; }));
  f.WaitConverged();
  f.Stop();
}

// A stream's max_age as STREAM.INFO reports it; nullopt when the stream cannot be read.
std::optional<int64_t> MaxAge(DaemonFixture& f, const std::string& stream) {
  observers::ApiReply reply = f.Bus().Request({"$JS.API.STREAM.INFO." + stream, ""});
  if (!reply.status.ok()) return std::nullopt;
  rapidjson::Document info;
  info.Parse(reply.payload.data(), reply.payload.size());
  if (info.HasParseError() || !info.IsObject() || !info.HasMember("config")) return std::nullopt;
  const rapidjson::Value& config = info["config"];
  if (!config.HasMember("max_age") || !config["max_age"].IsInt64()) return std::nullopt;
  return config["max_age"].GetInt64();
}

// Sets an owned field by hand, as an operator would: the observed config, max_age changed.
void SetMaxAge(DaemonFixture& f, const std::string& stream, int64_t max_age_ns) {
  observers::ApiReply reply = f.Bus().Request({"$JS.API.STREAM.INFO." + stream, ""});
  REQUIRE(reply.status.ok());
  rapidjson::Document info;
  info.Parse(reply.payload.data(), reply.payload.size());
  REQUIRE(info.IsObject());
  REQUIRE(info.HasMember("config"));
  rapidjson::Value& config = info["config"];
  config["max_age"].SetInt64(max_age_ns);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  config.Accept(writer);
  observers::ApiReply updated =
      f.Bus().Request({"$JS.API.STREAM.UPDATE." + stream, buffer.GetString()});
  INFO(updated.payload);
  REQUIRE(updated.status.ok());
  REQUIRE(updated.payload.find("\"error\"") == std::string::npos);
}

bool ConsumerExists(DaemonFixture& f, const std::string& stream, const std::string& durable) {
  observers::ApiReply reply =
      f.Bus().Request({"$JS.API.CONSUMER.INFO." + stream + "." + durable, ""});
  return reply.status.ok() && reply.payload.find("\"error\"") == std::string::npos;
}

TEST_CASE("A store restored from an older backup is repaired once the server is back",
          "[daemon][integration][server]") {
  // The backup is taken while the bus had drifted (a consumer deleted, an owned field changed
  // by hand, the daemon not running); the bus is repaired; then the data directory is replaced
  // by that backup and the server restarted. Nothing is deleted on the restored server, so no
  // advisory names what differs: the pass the reconnect wakes must find it.
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  const std::optional<int64_t> desired_max_age = MaxAge(f, "EVENTS");
  REQUIRE(desired_max_age);
  const int64_t hand_set_max_age = *desired_max_age + 3600 * model::kNanosPerSecond;
  f.Stop();
  observers::ApiReply deleted = f.Bus().Request({"$JS.API.CONSUMER.DELETE.DECL.decl_node-a", ""});
  REQUIRE(deleted.payload.find("\"success\":true") != std::string::npos);
  SetMaxAge(f, "EVENTS", hand_set_max_age);

  const std::string backup = f.mesh_.dir + "/jetstream-backup";
  f.mesh_.server->Stop();
  std::filesystem::copy(f.mesh_.server->store_dir(), backup,
                        std::filesystem::copy_options::recursive);
  f.mesh_.server->Restart();
  f.bus_.reset();  // the test's own connection: a new one, not one still reconnecting

  f.StartDaemon();
  f.WaitConverged();
  REQUIRE(ConsumerExists(f, "DECL", "decl_node-a"));
  REQUIRE(MaxAge(f, "EVENTS") == desired_max_age);
  const std::string updated =
      "mesh_reconciler_repairs_total{action=\"update\",kind=\"stream\",result=\"success\"}";
  const std::string created =
      "mesh_reconciler_repairs_total{action=\"create\",kind=\"consumer\",result=\"success\"}";
  REQUIRE(f.Metric(updated) == 1);
  REQUIRE(f.Metric(created) == 1);

  f.mesh_.server->Kill();
  std::filesystem::remove_all(f.mesh_.server->store_dir());
  std::filesystem::copy(backup, f.mesh_.server->store_dir(),
                        std::filesystem::copy_options::recursive);
  f.mesh_.server->Restart();
  f.bus_.reset();
  // The restored store is the backup's: the drift is back on the server.
  const bool repaired = WaitFor(
      [&] {
        return ConsumerExists(f, "DECL", "decl_node-a") && MaxAge(f, "EVENTS") == desired_max_age;
      },
      seconds(60));
  INFO(f.daemon_->log());
  REQUIRE(repaired);
  // Repaired again, not merely never lost: the restored server held the backup's drift. The
  // counters are read after a forced pass, which runs only once the repairing pass is over.
  f.WaitConverged();
  CHECK(f.Metric(updated) == 2);
  CHECK(f.Metric(created) == 2);
  f.Stop();
}

TEST_CASE("Repairs do not wait for hashing: streams first, the users file when hashes are ready",
          "[daemon][integration][server]") {
  // The users file was rendered at cost 4; the daemon runs at cost 5 with --rehash: no hash is
  // reused, so every password is hashed again on the background threads, the reconciler's own
  // entry first. The server's store is empty (a fresh server): every stream and consumer is
  // missing.
  DaemonFixture f(ExampleRecordsJson(), {"--bcrypt-cost", "5", "--rehash"});
  f.WaitConverged();
  // A pass that runs while the hashing is under way leaves the users file alone and reports
  // converged; the file is rewritten by the pass the finished hashing wakes.
  REQUIRE(mesh::testing::WaitFor(
      [&] {
        return f.Metric("mesh_reconciler_credentials_pending") == 0 &&
               mesh::testing::ReadFile(f.mesh_.server->users_file()).find("$2b$04$") ==
                   std::string::npos;
      },
      seconds(60)));
  // The file is on disk before the server has reloaded it. A forced pass runs after the pass
  // that wrote it, whose reload is then over: a client connecting during that reload may be
  // closed without an error (2.9.10, reload.go: a client whose CONNECT is still in flight has
  // no account yet, so clientHasMovedToDifferentAccount closes it), which failed this test's
  // own connection once in CI.
  f.WaitConverged();
  const std::string log = f.daemon_->log();
  INFO(log);
  // The first pass started the hashing and still created every stream and consumer.
  std::smatch first;
  REQUIRE(std::regex_search(log, first,
                            std::regex("pass finished[^\n]*actions=([0-9]+)[^\n]*"
                                       "converged=([a-z]+)[^\n]*credentials_pending=([0-9]+)")));
  CHECK(std::stoi(first[1]) > static_cast<int>(kExampleStreams.size()));
  CHECK(std::stoi(first[3]) == 4);  // 5 plain passwords, our own hashed first
  // Not converged while hashing: the users file does not hold those credentials yet.
  CHECK(first[2] == "false");
  CHECK(log.find("hashing passwords in the background") != std::string::npos);
  CHECK(log.find("own_entry_first=true") != std::string::npos);
  CHECK(log.find("hashing finished") != std::string::npos);
  for (const auto& stream : kExampleStreams) CHECK(f.StreamExists(stream));
  CHECK(f.Metric("mesh_reconciler_credentials_pending") == 0);
  // The users file was rewritten at the new cost, and the server accepts every entry.
  const std::string users = mesh::testing::ReadFile(f.mesh_.server->users_file());
  CHECK(users.find("$2b$04$") == std::string::npos);
  CHECK(users.find("$2b$05$") != std::string::npos);
  for (const auto& [user, password] : std::vector<std::pair<std::string, std::string>>{
           {"mesh-controller", "demo-only-controller-password"},
           {"node-a", "demo-only-node-a-password"},
           {"billing", "demo-only-billing-password"},
           {"shop", "demo-only-shop-password"},
           {kReconcilerUser, kReconcilerPassword}}) {
    INFO(user);
    natsStatus status = NATS_OK;
    auto connection = mesh::testing::ConnectNats(f.mesh_.server->url(), user, password, {}, status);
    CHECK(status == NATS_OK);
  }
  f.Stop();
}

// Issue 37 item 8: a daemon started at another --bcrypt-cost than the users file's hashed every
// password again and rewrote the file. A hash its digest proves is now kept (without --rehash):
// the file stays as it is, and nothing is hashed.
TEST_CASE("A daemon at another --bcrypt-cost keeps the proven hashes: no hashing, no rewrite",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson(), {"--bcrypt-cost", "5"}, Launch::kLater);
  const std::string before = mesh::testing::ReadFile(f.mesh_.server->users_file());
  REQUIRE(before.find("$2b$04$") != std::string::npos);
  f.StartDaemon();
  f.WaitConverged();
  const std::string log = f.daemon_->log();
  INFO(log);
  CHECK(log.find("hashes of another cost than --bcrypt-cost kept") != std::string::npos);
  CHECK(log.find("hashing passwords in the background") == std::string::npos);
  CHECK(log.find("write_users_file") == std::string::npos);
  CHECK(mesh::testing::ReadFile(f.mesh_.server->users_file()) == before);
  f.Stop();
}

// bcrypt cannot be interrupted, and SIGTERM waited for every hash under way: at cost 15 on a
// saturated CPU (the hashing runs at nice 19) that took over a minute, past the kubelet's grace
// period. At cost 17 one hash takes seconds (5.4 s of CPU on the 2-core VM of 2026-12-04). The
// four passwords are hashed two at a time; the signal comes once the first pass is over, while
// the first two hashes are under way: before, the daemon exited seconds later, when they were
// done; now it waits at most 1 s for them.
// (The signal used to wait for the second hash reported done. Beside two CPU-bound processes a
// nice 19 thread gets about 1.5% of a core, two hashes at cost 17 then take minutes, and the
// 180 s wait for them failed: the test measured the machine's load before it signalled.)
TEST_CASE("SIGTERM does not wait for the hashes under way", "[daemon][integration][server]") {
  // The server's users file is rendered at the cheapest cost from the example records; the
  // daemon starts with records in which every other plain password has changed. Our own entry
  // is proven by the file (kept at its cost), so the first pass writes nothing: it starts
  // hashing the four new passwords at cost 17 and ends at once, and the signal comes while
  // their work is ahead. (With --rehash the first pass wrote our own cost-17 entry, the server
  // checked our connection against it, a bcrypt as long as a background hash, and the signal
  // landed as the first two hashes were ending: they finished within the grace and the
  // daemon took its ordinary way out.)
  DaemonFixture f(ExampleRecordsJson(), {"--bcrypt-cost", "17"}, Launch::kLater);
  std::string changed = ExampleRecordsJson();
  for (const std::string who : {"controller", "node-a", "billing", "shop"})
    changed = Replace(changed, "demo-only-" + who + "-password", "changed-" + who + "-password");
  f.mesh_.SetRecords(changed);
  // What is measured is the daemon's own exit. Under ThreadSanitizer, an exit while other
  // threads run (the hashing threads, here on purpose) first sleeps atexit_sleep_ms (1 s by
  // default) so that they can report races: that second is the sanitizer's, and beside two
  // CPU-bound processes it took the exit past the bound (3.15 s). Races during the run are
  // still reported; only the sleep at exit is left out.
  const char* tsan_options = std::getenv("TSAN_OPTIONS");
  f.env_.push_back("TSAN_OPTIONS=" + std::string(tsan_options ? tsan_options : "") +
                   " atexit_sleep_ms=0");
  f.StartDaemon();
  REQUIRE(WaitFor(
      [&] {
        const std::string log = f.daemon_->log();
        const size_t hashing = log.find("msg=\"hashing passwords in the background\" pending=4");
        return hashing != std::string::npos &&
               log.find("msg=\"pass finished\"", hashing) != std::string::npos;
      },
      seconds(120)));  // the first pass derives the digest key at cost 17: one bcrypt
  const auto start = std::chrono::steady_clock::now();
  const std::optional<int> code = f.daemon_->Terminate(seconds(180));
  const auto took = std::chrono::steady_clock::now() - start;
  const std::string log = f.daemon_->log();
  INFO(log);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(took < seconds(3));
  CHECK(log.find("not waiting for the hashes under way") != std::string::npos);
  CHECK(log.find("msg=stopped") != std::string::npos);
}

// Puts `value` into `folder`/`name` as the kubelet updates a Secret's volume: the files in a
// new folder, a "..data" link swapped to it by rename, and `name` a link through "..data".
void WriteSecretAsKubelet(const std::string& folder, const std::string& name,
                          const std::string& value, int generation) {
  const std::string data = "..generation_" + std::to_string(generation);
  std::filesystem::create_directories(folder + "/" + data);
  mesh::testing::WriteFile(folder + "/" + data + "/" + name, value + "\n");
  std::filesystem::create_symlink(data, folder + "/..data_tmp");
  std::filesystem::rename(folder + "/..data_tmp", folder + "/..data");
  if (!std::filesystem::is_symlink(folder + "/" + name))
    std::filesystem::create_symlink("..data/" + name, folder + "/" + name);
}

// The sum of mesh_reconciler_passes_total's failures, over every trigger.
double FailedPasses(const DaemonProcess& daemon) {
  auto metrics = daemon.Get("/metrics");
  if (!metrics.ok()) return -1;
  double sum = 0;
  std::istringstream lines(metrics->body);
  const std::string prefix = "mesh_reconciler_passes_total{result=\"failure\"";
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) sum += std::strtod(line.c_str() + line.rfind(' '), nullptr);
  }
  return sum;
}

// Before, a rotated password (a Secret update) was used only after a restart: a forced pass
// still rendered and logged in with the old one.
TEST_CASE("A rotated password file is rendered, loaded and logged in with, no pass failing",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson(), {}, Launch::kLater);
  const std::string secret = f.mesh_.dir + "/secret";
  WriteSecretAsKubelet(secret, "password", kReconcilerPassword, 1);
  f.extra_ = {"--password-file", secret + "/password"};
  f.env_.clear();
  f.StartDaemon();
  f.WaitConverged();
  const double failed_before = FailedPasses(*f.daemon_);

  const std::string rotated = "rotated-reconciler-password-7c41";
  WriteSecretAsKubelet(secret, "password", rotated, 2);
  const bool switched = WaitFor([&] {
    return f.daemon_->log().find("the server loaded the rotated password: connecting with it") !=
           std::string::npos;
  });
  std::string log = f.daemon_->log();
  INFO(log);
  REQUIRE(switched);
  CHECK(log.find("msg=\"password rotated: rendered into the users file") != std::string::npos);
  // The server has the new password, and no longer the old one.
  Settings s = f.mesh_.PassSettings();
  s.bus.password = rotated;
  CHECK(observers::BusConnection::Connect(s.bus).ok());
  s.bus.password = kReconcilerPassword;
  CHECK_FALSE(observers::BusConnection::Connect(s.bus).ok());
  // The daemon works on with it: a forced pass converges, and none failed meanwhile.
  f.WaitConverged();
  CHECK(f.Metric("mesh_reconciler_bus_connected") == 1);
  CHECK(FailedPasses(*f.daemon_) == failed_before);
  // Every other entry's hash was kept: only our own was hashed again.
  log = f.daemon_->log();
  const size_t rotated_at = log.find("password rotated");
  REQUIRE(rotated_at != std::string::npos);
  const std::string after = log.substr(rotated_at);
  CHECK(after.find("passwords_hashed=1") != std::string::npos);
  f.Stop();
}

// A mask of /proc/<pid>/status, or of one thread's (/proc/<pid>/task/<tid>/status): "SigCgt:",
// "SigBlk:", hexadecimal, bit n-1 for signal n.
uint64_t SignalMask(const std::string& proc_dir, const std::string& field) {
  const std::string status = mesh::testing::ReadFile(proc_dir + "/status");
  const size_t at = status.find("\n" + field + ":");
  if (at == std::string::npos) return 0;
  return std::stoull(status.substr(at + field.size() + 2), nullptr, 16);
}
uint64_t Bit(int signal_number) {
  return uint64_t{1} << (signal_number - 1);
}

// Before, SIGHUP, SIGUSR1 and SIGUSR2 ended the daemon by their default action (exit 129, 138,
// 140): no "shutting down" line and no release of the lease, so standbys waited 1.5 intervals.
TEST_CASE("SIGHUP re-reads and runs a pass, SIGUSR1 and SIGUSR2 are ignored, SIGQUIT stops",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  const pid_t pid = f.daemon_->pid();
  // Taken with sigwait on the main thread, never by a handler (no signal-unsafe call can run
  // inside one): blocked, not caught.
  // (The main thread's own mask lets them through while it waits in sigwait: every other
  // thread blocks them.)
  const uint64_t ours =
      Bit(SIGHUP) | Bit(SIGINT) | Bit(SIGQUIT) | Bit(SIGUSR1) | Bit(SIGUSR2) | Bit(SIGTERM);
  const std::string proc = "/proc/" + std::to_string(pid);
  CHECK((SignalMask(proc, "SigCgt") & ours) == 0);
  CHECK((SignalMask(proc, "SigIgn") & Bit(SIGPIPE)) != 0);
  int threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task")) {
    if (task.path().filename() == std::to_string(pid)) continue;
    ++threads;
    INFO("thread " << task.path().filename());
    CHECK((SignalMask(task.path().string(), "SigBlk") & ours) == ours);
  }
  CHECK(threads > 0);

  auto logged = [&](const std::string& line) {
    return WaitFor([&] { return f.daemon_->log().find(line) != std::string::npos; });
  };
  REQUIRE(kill(pid, SIGUSR1) == 0);
  REQUIRE(kill(pid, SIGUSR2) == 0);
  CHECK(logged("msg=\"signal ignored\" signal=USR1"));
  CHECK(logged("msg=\"signal ignored\" signal=USR2"));

  const std::string records_passes =
      "mesh_reconciler_passes_total{result=\"success\",trigger=\"records_changed\"}";
  const double before = f.daemon_->Metric(records_passes).value_or(0);
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(logged("msg=\"re-reading files\" signal=HUP"));
  CHECK(WaitFor([&] { return f.daemon_->Metric(records_passes).value_or(0) > before; }));
  // Alive and serving through all three.
  auto health = f.daemon_->Get("/healthz");
  REQUIRE(health.ok());
  CHECK(health->status == 200);

  const std::optional<int> code = f.daemon_->Terminate(kShutdownDeadline, SIGQUIT);
  const std::string log = f.daemon_->log();
  INFO(log);
  REQUIRE(code.has_value());
  CHECK(*code == 0);
  CHECK(log.find("msg=\"shutting down\" signal=QUIT") != std::string::npos);
  CHECK(log.find("msg=stopped") != std::string::npos);
}

TEST_CASE("The bus unreachable at start is not fatal: endpoints served, then it connects",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson(), {}, Launch::kLater);
  f.mesh_.server->Kill();
  f.StartDaemon();
  REQUIRE(WaitFor([&] {
    auto ready = f.daemon_->Get("/readyz");
    return ready.ok() && ready->status == 503 && ready->body.find("bus unreachable") == 0;
  }));
  auto health = f.daemon_->Get("/healthz");
  REQUIRE(health.ok());
  CHECK(health->status == 200);
  CHECK(f.Metric("mesh_reconciler_bus_connected") == 0);
  f.mesh_.server->Restart();
  REQUIRE(WaitFor(
      [&] {
        auto ready = f.daemon_->Get("/readyz");
        return ready.ok() && ready->status == 200;
      },
      seconds(90)));
  f.WaitConverged();
  f.Stop();
}

TEST_CASE("A real Prometheus scrapes the daemon", "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();

  const std::string dir = mesh::testing::MakeTempDir("mesh-prometheus");
  const int port = mesh::testing::FreePort();
  mesh::testing::WriteFile(dir + "/prometheus.yml",
                           "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                           "scrape_configs:\n  - job_name: mesh-reconciler\n"
                           "    static_configs:\n      - targets: ['127.0.0.1:" +
                               std::to_string(f.daemon_->port()) + "']\n");
  const pid_t prometheus = SpawnWithLog(
      "/usr/bin/prometheus",
      {"--config.file=" + dir + "/prometheus.yml", "--storage.tsdb.path=" + dir + "/data",
       "--web.listen-address=127.0.0.1:" + std::to_string(port), "--log.level=warn"},
      {}, dir + "/prometheus.log");
  const std::string query = "http://127.0.0.1:" + std::to_string(port) + "/api/v1/query?query=";
  auto value_of = [&](const std::string& expression) -> std::string {
    auto reply = observers::HttpGet(query + expression, seconds(2));
    if (!reply.ok() || reply->status != 200) return "";
    rapidjson::Document doc;
    doc.Parse(reply->body.c_str());
    if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("data")) return "";
    const auto& result = doc["data"]["result"];
    if (!result.IsArray() || result.Empty()) return "";
    return result[0]["value"][1].GetString();
  };
  const bool scraped =
      WaitFor([&] { return value_of("mesh_reconciler_bus_connected") == "1"; }, seconds(90));
  std::string up = value_of("up");
  std::string build_info = value_of("mesh_reconciler_build_info");
  kill(prometheus, SIGTERM);
  const std::optional<int> stopped = WaitExit(prometheus, seconds(20));
  if (!stopped) {
    kill(prometheus, SIGKILL);
    waitpid(prometheus, nullptr, 0);
  }
  INFO(mesh::testing::ReadFile(dir + "/prometheus.log"));
  CHECK(scraped);
  CHECK(up == "1");
  CHECK(build_info == "1");
  if (scraped) std::filesystem::remove_all(dir);
  f.Stop();
}

TEST_CASE("A forced reconcile during a running pass gets a pass that started after it",
          "[daemon][integration][server]") {
  // A high bcrypt cost makes a pass that must hash a new password last a while.
  DaemonFixture f(ExampleRecordsJson(), {"--bcrypt-cost", "12"});
  f.WaitConverged();
  const std::string log_before = f.daemon_->log();

  f.mesh_.SetRecords(Replace(ExampleRecordsJson(), "{ \"name\": \"node-c\" }",
                             "{ \"name\": \"node-c\", \"password\": \"a-new-password\" }"));
  // The records change wakes pass K, which hashes the new password.
  const std::regex scheduled("pass=([0-9]+) msg=\"pass scheduled\" trigger=records_changed");
  std::smatch match;
  std::string log;
  REQUIRE(WaitFor([&] {
    log = f.daemon_->log().substr(log_before.size());
    return std::regex_search(log, match, scheduled);
  }));
  const uint64_t running = std::stoull(match[1].str());
  Result<PassReport> forced = f.Reconcile();
  INFO(f.daemon_->log());
  REQUIRE(forced.ok());
  CHECK(forced->pass_id > running);
  CHECK(forced->trigger == Trigger::kForced);
  CHECK(forced->status.ok());
  f.Stop();
}

// Issue 38 item 6: 1,000 POST /reconcile in one second ran 193 passes and refused 807 with 503;
// each waiting POST held one of the 4 HTTP threads.
TEST_CASE(
    "A thousand concurrent forced reconciles share at most two passes, and probes are answered",
    "[daemon][integration][server]") {
  constexpr int kRequests = 1000;
  // All from 127.0.0.2, as from one tool on one host: over the default 64 per address, so the
  // daemon is given a per-address cap above the burst (the probes come from 127.0.0.1).
  constexpr int kAddresses = 1;
  // 1,000 sockets here and as many in the daemon.
  rlimit files{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_cur < 4096 && files.rlim_max > files.rlim_cur) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, 4096);
    REQUIRE(setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  DaemonFixture f(ExampleRecordsJson(),
                  {"--http-connections", "1200", "--http-connections-per-client", "1100"});
  f.WaitConverged();
  const size_t log_before = f.daemon_->log().size();

  // Probes from 127.0.0.1 all along, each answered within 2 s.
  std::atomic<bool> probing{true};
  std::atomic<int> probes{0};
  std::atomic<int> probes_failed{0};
  std::thread prober([&] {
    while (probing) {
      auto health = f.daemon_->Get("/healthz", seconds(2));
      ++probes;
      if (!health.ok() || health->status != 200) ++probes_failed;
      std::this_thread::sleep_for(milliseconds(20));  // a pace, not a synchronisation
    }
  });

  const std::string request =
      "POST /reconcile HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
      std::string(kAdminToken) + "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  std::vector<int> sockets;
  for (int i = 0; i < kRequests; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockets.push_back(fd);
    timeval tv{60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl(0x7f000002u + static_cast<uint32_t>(i % kAddresses));
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(f.daemon_->port()));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  }
  const auto burst = std::chrono::steady_clock::now();
  for (int fd : sockets) {
    REQUIRE(send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(request.size()));
  }
  const auto sent = std::chrono::steady_clock::now();
  std::map<int, int> statuses;
  std::set<uint64_t> pass_ids;
  std::string first_failure;
  for (int fd : sockets) {
    std::string reply;
    char buffer[16384];
    ssize_t n = 0;
    while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0)
      reply.append(buffer, static_cast<size_t>(n));
    close(fd);
    const int status = reply.size() > 12 ? std::atoi(reply.c_str() + 9) : -1;
    ++statuses[status];
    const size_t body = reply.find("\r\n\r\n");
    Result<PassReport> report = body == std::string::npos
                                    ? Result<PassReport>(Status(Errc::kInternal, "no body"))
                                    : ReportFromJson(reply.substr(body + 4));
    if (status == 200 && report.ok()) {
      pass_ids.insert(report->pass_id);
    } else if (first_failure.empty()) {
      first_failure = reply.substr(0, 300);
    }
  }
  const auto answered = std::chrono::steady_clock::now();
  probing = false;
  prober.join();

  const std::string log = f.daemon_->log().substr(log_before);
  size_t passes = 0;
  for (size_t at = log.find("msg=\"pass scheduled\""); at != std::string::npos;
       at = log.find("msg=\"pass scheduled\"", at + 1)) {
    ++passes;
  }
  INFO("sent in " << std::chrono::duration<double>(sent - burst).count() << " s, answered in "
                  << std::chrono::duration<double>(answered - burst).count() << " s");
  INFO("first failure: " << first_failure);
  INFO(log.substr(0, 4000));
  CHECK(statuses[200] == kRequests);
  CHECK(statuses.size() == 1);
  CHECK(passes <= 2);
  CHECK(pass_ids.size() <= 2);
  CHECK(probes > 0);
  CHECK(probes_failed == 0);
  f.Stop();
}

TEST_CASE("While held a deleted stream is left alone, after release it is repaired",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();

  std::vector<std::string> hold = f.Remote("hold");
  hold.insert(hold.end(), {"--for", "10m", "--reason", "restore SEAT_intake from backup"});
  CliResult held = RunCli(hold);
  INFO(held.output);
  REQUIRE(held.exit_code == 0);
  CHECK(held.output.find("held until ") == 0);
  CHECK(f.Metric("mesh_reconciler_held") == 1);
  // Who held it (the CLI's loopback address) and why: in the log and in /drift.
  CHECK(std::regex_search(
      f.daemon_->log(),
      std::regex(R"(msg="held: passes observe only" scope=pod by=127\.0\.0\.1:\d+ )"
                 R"(reason="restore SEAT_intake from backup" for_ms=600000 )"
                 R"(until=\d{4}-\d\d-\d\dT)")));
  auto drift_held = f.daemon_->Get("/drift");
  REQUIRE(drift_held.ok());
  rapidjson::Document drift_doc;
  drift_doc.Parse(drift_held->body.c_str());
  REQUIRE(drift_doc.IsObject());
  REQUIRE(drift_doc.HasMember("hold"));
  CHECK(drift_doc["hold"]["held"].GetBool());
  CHECK(std::string(drift_doc["hold"]["reason"].GetString()) == "restore SEAT_intake from backup");
  CHECK(std::string(drift_doc["hold"]["by"].GetString()).rfind("127.0.0.1:", 0) == 0);
  CHECK(drift_doc["hold"]["until_unix_ms"].GetInt64() > 0);

  f.DeleteStream("SEAT_intake");
  // The advisory wakes an observe-only pass: the drift shows, nothing is repaired.
  REQUIRE(WaitFor([&] { return f.Metric(kStreamsMissing) == 1; }));
  CHECK_FALSE(f.StreamExists("SEAT_intake"));
  CliResult drift = RunCli(f.Remote("reconcile"));
  INFO(drift.output);
  CHECK(drift.exit_code == 2);
  CHECK(drift.output.find("SEAT_intake") != std::string::npos);
  CHECK_FALSE(f.StreamExists("SEAT_intake"));

  // A wrong token changes nothing.
  const std::string wrong = f.mesh_.dir + "/wrong.token";
  mesh::testing::WriteFile(wrong, "not-the-token\n");
  CliResult refused = RunCli({"release", "--remote", f.daemon_->url(), "--token-file", wrong});
  CHECK(refused.exit_code == 1);
  CHECK(refused.output.find("401") != std::string::npos);
  CHECK(f.Metric("mesh_reconciler_held") == 1);

  std::vector<std::string> release = f.Remote("release");
  release.insert(release.end(), {"--reason", "backup restored"});
  CliResult released = RunCli(release);
  INFO(released.output);
  REQUIRE(released.exit_code == 0);
  CHECK(std::regex_search(f.daemon_->log(),
                          std::regex(R"(msg="released: passes apply again" by=127\.0\.0\.1:\d+ )"
                                     R"(reason="backup restored" held_by=127\.0\.0\.1:\d+ )"
                                     R"(held_reason="restore SEAT_intake from backup")")));
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_intake"); }, kRepairDeadline));
  REQUIRE(WaitFor([&] { return f.Metric(kStreamsMissing) == 0; }));
  CHECK(f.Metric("mesh_reconciler_held") == 0);
  CliResult converged = RunCli(f.Remote("reconcile"));
  INFO(converged.output);
  CHECK(converged.exit_code == 0);
  auto drift_free = f.daemon_->Get("/drift");
  REQUIRE(drift_free.ok());
  rapidjson::Document free_doc;
  free_doc.Parse(drift_free->body.c_str());
  REQUIRE(free_doc.IsObject());
  CHECK(std::string(free_doc["schema"].GetString()) == "mesh-reconciler/drift/v1");
  CHECK_FALSE(free_doc["hold"]["held"].GetBool());
  CHECK_FALSE(free_doc["hold"].HasMember("reason"));

  // A reason that would forge a log line is refused before anything is sent.
  std::vector<std::string> forged = f.Remote("hold");
  forged.insert(forged.end(), {"--reason", "x\nts=2026 level=info msg=released"});
  CliResult refused_reason = RunCli(forged);
  CHECK(refused_reason.exit_code == 64);
  CHECK(refused_reason.output.find("--reason") != std::string::npos);
  // Not UTF-8, or a C1 control: the CLI applies the endpoint's own check (it used to pass
  // these on and print the daemon's 400 as an error, exit 1).
  for (const char* reason : {"caf\xff", "next\xc2\x85line"}) {
    std::vector<std::string> bad = f.Remote("hold");
    bad.insert(bad.end(), {"--reason", reason});
    CliResult refused = RunCli(bad);
    CHECK(refused.exit_code == 64);
    CHECK(refused.output.find("--reason: UTF-8 text without control characters") !=
          std::string::npos);
  }
  CHECK(f.Metric("mesh_reconciler_held") == 0);
  f.Stop();
}

TEST_CASE("Invalid records change nothing and say why, fixed records resume",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  const std::string users_before = mesh::testing::ReadFile(f.mesh_.server->users_file());

  // Invalid (an unknown key), and asking for a new stream: none of it may be applied.
  ReplaceFile(f.mesh_.records_path, Replace(RecordsWithExtraRole(), "\"mesh\": \"demo\",",
                                            "\"mesh\": \"demo\", \"typo\": 1,"));
  REQUIRE(WaitFor([&] { return f.Metric("mesh_reconciler_records_valid") == 0; }));
  auto ready = f.daemon_->Get("/readyz");
  REQUIRE(ready.ok());
  CHECK(ready->status == 503);
  CHECK(ready->body.find("records invalid: ") == 0);
  CHECK(ready->body.find("typo") != std::string::npos);
  // The last valid records stay in force: a deleted stream is still repaired.
  f.DeleteStream("SEAT_ledger");
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_ledger"); }, kRepairDeadline));
  CHECK_FALSE(f.StreamExists("SEAT_mesh-extra"));
  CHECK(mesh::testing::ReadFile(f.mesh_.server->users_file()) == users_before);

  ReplaceFile(f.mesh_.records_path, RecordsWithExtraRole());
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_mesh-extra"); }, kRepairDeadline));
  REQUIRE(WaitFor([&] { return f.Metric("mesh_reconciler_records_valid") == 1; }));
  REQUIRE(WaitFor([&] {
    auto r = f.daemon_->Get("/readyz");
    return r.ok() && r->status == 200;
  }));
  f.Stop();
}

// Every secret the daemon handles, as it appears in the records, its environment and its
// files: the reconciler's password, each plain and bcrypt password of the records, the admin
// token. None may appear in a log line (at debug level), /metrics, /drift or a forced report,
// nor any bcrypt hash at all, through passes that rewrite the users file, re-hash a changed
// password and repair a deleted stream.
TEST_CASE("Nothing the daemon logs or serves carries a password, a hash or the token",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson(), {"--log-level", "debug"});
  f.WaitConverged();
  std::vector<std::string> secrets = {kReconcilerPassword, kAdminToken, "$2a$", "$2b$", "$2y$"};
  const std::regex password_field(R"re("password(_bcrypt)?":\s*"([^"]+)")re");
  const std::string records = ExampleRecordsJson();
  for (std::sregex_iterator it(records.begin(), records.end(), password_field), end; it != end;
       ++it) {
    secrets.push_back((*it)[2].str());
  }
  REQUIRE(secrets.size() > 8);  // the example records hold several passwords

  // A hand-edited users file (rewritten and reloaded), a changed password (hashed anew) and a
  // deleted stream (recreated).
  ReplaceFile(f.mesh_.server->users_file(), "# hand-edited\n");
  ReplaceFile(f.mesh_.records_path,
              Replace(records, "demo-only-node-a-password", "demo-only-node-a-rotated-password"));
  secrets.push_back("demo-only-node-a-rotated-password");
  f.DeleteStream("EVENTS");
  f.WaitConverged();

  auto forced = f.daemon_->Post("/reconcile", kAdminToken);
  auto drift = f.daemon_->Get("/drift");
  auto metrics = f.daemon_->Get("/metrics");
  REQUIRE(forced.ok());
  REQUIRE(drift.ok());
  REQUIRE(metrics.ok());
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"log", f.daemon_->log()},
      {"POST /reconcile", forced->body},
      {"GET /drift", drift->body},
      {"GET /metrics", metrics->body}};
  for (const auto& [where, text] : outputs) {
    REQUIRE_FALSE(text.empty());
    for (const std::string& secret : secrets) {
      INFO(where << " must not contain " << secret);
      CHECK(text.find(secret) == std::string::npos);
    }
  }
  // The passes did what the test relies on: the file was rewritten and the stream recreated.
  CHECK(f.daemon_->log().find("write_users_file") != std::string::npos);
  CHECK(f.StreamExists("EVENTS"));
}

TEST_CASE("The admin token is re-read when its file changes", "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  auto with = [&](const std::string& token) {
    auto reply = f.daemon_->Post("/release", token, seconds(10));
    return reply.ok() ? reply->status : 0;
  };
  CHECK(with(kAdminToken) == 200);
  ReplaceFile(f.token_path_, std::string(kRotatedToken) + "\n");
  REQUIRE(WaitFor([&] { return with(kRotatedToken) == 200; }));
  CHECK(with(kAdminToken) == 401);
  // An empty token file turns the POSTs off (fail closed) until fixed.
  ReplaceFile(f.token_path_, "\n");
  REQUIRE(WaitFor([&] { return with(kRotatedToken) == 403; }));
  f.Stop();
}

}  // namespace
}  // namespace mesh::reconciler::test

namespace mesh::reconciler::test {
namespace {

TEST_CASE("Ephemeral consumers churning on EVENTS and a foreign stream wake no pass",
          "[daemon][integration][server]") {
  DaemonFixture f(ExampleRecordsJson());
  f.WaitConverged();
  auto call = [&](const std::string& api, const std::string& payload) {
    observers::ApiReply reply = f.Bus().Request({"$JS.API." + api, payload});
    INFO(api << " -> " << reply.payload);
    REQUIRE(reply.status.ok());
    REQUIRE(reply.payload.find("\"error\"") == std::string::npos);
    return reply.payload;
  };
  call("STREAM.CREATE.ORDERS", R"({"name":"ORDERS","subjects":["orders.>"]})");
  // Passes woken by advisories (repairs of the named streams and the full passes that follow
  // those that did not settle), whatever their result: on 2.9 a consumer created on a stream
  // recreated a moment ago can be refused (10012, issue 11 item 3), failing that pass.
  auto advisory_passes = [&] {
    double passes = 0;
    for (const char* trigger : {"advisory", "repair"}) {
      for (const char* result : {"success", "failure"}) {
        passes += f.daemon_
                      ->Metric(std::string("mesh_reconciler_passes_total{result=\"") + result +
                               "\",trigger=\"" + trigger + "\"}")
                      .value_or(0);
      }
    }
    return passes;
  };
  // The ORDERS creation may wake one pass (no scope yet names it foreign); let it finish.
  f.WaitConverged();
  const double before = advisory_passes();

  for (int i = 0; i < 100; ++i) {
    for (const std::string stream : {"EVENTS", "ORDERS"}) {
      const std::string created =
          call("CONSUMER.CREATE." + stream, R"({"stream_name":")" + stream +
                                                R"(","config":{"deliver_subject":"_INBOX.eph",)"
                                                R"("ack_policy":"none"}})");
      const size_t at = created.find(",\"name\":\"");
      REQUIRE(at != std::string::npos);
      const size_t begin = at + 9;
      const std::string name = created.substr(begin, created.find('"', begin) - begin);
      call("CONSUMER.DELETE." + stream + "." + name, "");
    }
  }
  // Advisories arrive in order: once the deletion after the storm is repaired, the daemon has
  // seen every advisory of the storm.
  f.DeleteStream("SEAT_ledger");
  REQUIRE(WaitFor([&] { return f.StreamExists("SEAT_ledger"); }, kRepairDeadline));
  f.WaitConverged();
  const double woken = advisory_passes() - before;
  INFO(f.daemon_->log());
  CHECK(woken >= 1);  // the deletion
  // The deletion's (its consumer's, its own), its re-creation's (the stream's, the
  // consumer's), and a full pass should one of those repairs not settle; never 400.
  CHECK(woken <= 5);
  f.Stop();
}

// A large apply also goes over further connections ("lanes") where the server handles one
// connection's requests one after another (2.9 to 2.11.9). One the server refused left no trace:
// the apply went on one connection, slower, and neither the log nor /metrics said why.
TEST_CASE("Lanes the server refuses are logged and counted, and the mesh converges all the same",
          "[daemon][integration][server]") {
  if (!observers::HandlesApiRequestsInPlace(
          observers::ParseServerVersion(mesh::testing::ServerBinaryVersion()))) {
    SUCCEED("2.11.10 on: no lanes to open");
    return;
  }
  // The Medium mesh's first pass creates some 350 consumers: a spread apply. The server takes
  // the daemon's connection and no other one.
  DaemonFixture f(
      mesh::testing::ToJson(mesh::testing::GenerateMesh(mesh::testing::MeshSize::Medium())), {},
      Launch::kNow, "max_connections: 1");
  f.WaitConverged();
  // Counted when the attempt ends (it may outlast the apply that started it), reported by the
  // pass after; then no new attempt within the minute.
  const std::string failures = "mesh_reconciler_bus_lane_open_failures_total";
  CHECK(WaitFor([&] {
    (void)f.Reconcile();
    return f.Metric(failures) == 3;
  }));
  const std::string log = f.daemon_->log();
  INFO(log);
  CHECK(log.find("lanes could not be opened; large applies use the connections open") !=
        std::string::npos);
  CHECK(log.find("open lane ") != std::string::npos);
  CHECK(log.find(kReconcilerPassword) == std::string::npos);
  f.Stop();
}

TEST_CASE("the advisory floor is a duration, from its flag or MESH_RECONCILER_ADVISORY_FLOOR",
          "[daemon]") {
  auto parsed = ParseSettings({"--advisory-floor", "250ms"},
                              [](const char*) -> const char* { return nullptr; });
  REQUIRE(parsed.ok());
  CHECK(parsed->advisory_floor == std::chrono::milliseconds(250));
  auto from_env = ParseSettings({}, [](const char* name) -> const char* {
    return std::string(name) == "MESH_RECONCILER_ADVISORY_FLOOR" ? "0s" : nullptr;
  });
  REQUIRE(from_env.ok());
  CHECK(from_env->advisory_floor == std::chrono::milliseconds(0));
  CHECK(ParseSettings({}, [](const char*) -> const char* { return nullptr; })->advisory_floor ==
        std::chrono::milliseconds(100));
  CHECK_FALSE(ParseSettings({"--advisory-floor", "2m"}, [](const char*) -> const char* {
                return nullptr;
              }).ok());
}

}  // namespace
}  // namespace mesh::reconciler::test
