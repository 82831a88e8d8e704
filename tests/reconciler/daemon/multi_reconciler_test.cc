// The proof that several reconcilers can watch one cluster: three daemons (`mesh-reconciler run
// --lease`, the real binary), one per member of a 3-node JetStream cluster, each keeping its own
// member's users file. Only the holder of the KV lease acts on JetStream objects: a deleted
// stream is recreated exactly once (counted by the server's creation advisories), passes after
// convergence repair nothing, and when the holder's daemon is killed another takes the lease
// and still repairs.
#include <catch2/catch.hpp>
#include <map>
#include <mutex>
#include <sstream>

#include "observers/bus.h"
#include "tests/support/cluster_fixtures.h"
#include "tests/support/daemon_support.h"

namespace mesh::reconciler::test {
namespace {

using mesh::testing::WaitFor;
using std::chrono::seconds;

constexpr char kAdminToken[] = "multi-reconciler-test-token-3c9a7e1f";
constexpr char kLeaseHolder[] = "mesh_reconciler_lease_holder";
constexpr char kStreamCreated[] = "$JS.EVENT.ADVISORY.STREAM.CREATED.";
constexpr char kStreamCreates[] =
    "mesh_reconciler_repairs_total{action=\"create\",kind=\"stream\",result=\"success\"}";
constexpr int kQuietPasses = 5;  // forced passes per daemon after convergence
// A forming 2.10.27 cluster may refuse 3-replica placements ("no suitable peers") for over
// 30 s, and nothing can hold the lease (its bucket has 3 replicas) until it accepts them.
constexpr auto kConvergeDeadline = seconds(180);
constexpr auto kRepairDeadline = seconds(60);

// The sum of every sample of metric `name` (all label sets).
double SumOf(const std::string& metrics_text, const std::string& name) {
  std::istringstream lines(metrics_text);
  std::string line;
  double sum = 0;
  while (std::getline(lines, line)) {
    if (line.compare(0, name.size(), name) != 0 || line.size() <= name.size()) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    sum += std::strtod(line.c_str() + line.rfind(' ') + 1, nullptr);
  }
  return sum;
}

// Counts the server's stream creation advisories, per stream, on its own connection.
class CreationCounter {
 public:
  explicit CreationCounter(const ClusterMesh& mesh, size_t member) {
    bus_ = mesh.Connect(member, [this](observers::BusEvent event, const std::string& subject) {
      if (event != observers::BusEvent::kAdvisory) return;
      if (subject.rfind(kStreamCreated, 0) != 0) return;
      std::lock_guard<std::mutex> lock(mutex_);
      ++created_[subject.substr(std::string(kStreamCreated).size())];
    });
    REQUIRE(bus_->SubscribeAdvisories().ok());
  }
  int Created(const std::string& stream) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = created_.find(stream);
    return it == created_.end() ? 0 : it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> created_;
  std::unique_ptr<observers::BusConnection> bus_;  // last: closed before the map goes
};

// One daemon per cluster member, as one sidecar per nats-server pod.
class Pods {
 public:
  explicit Pods(ClusterMesh& mesh) {
    token_path_ = mesh.dir() + "/admin.token";
    mesh::testing::WriteFile(token_path_, std::string(kAdminToken) + "\n");
    // 0600, as a deployment keeps it (readable by others, the daemon and the CLI warn).
    std::filesystem::permissions(
        token_path_, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    for (size_t i = 0; i < mesh.cluster().size(); ++i) {
      const mesh::testing::NatsServer& member = mesh.cluster().member(i);
      daemons_.push_back(DaemonProcess::Start(
          {"--records", mesh.records_path(), "--bus", member.url(), "--user", kReconcilerUser,
           "--users-file", member.users_file(), "--pid-file", member.pid_file(), "--monitor",
           member.monitor_url(), "--bcrypt-cost", std::to_string(kCheapCost), "--token-file",
           token_path_, "--interval", "1s", "--lease"},
          {std::string("MESH_RECONCILER_PASSWORD=") + kReconcilerPassword}));
    }
  }

  // One more daemon on member `member`, as a pod started later: JetStream only (the member's
  // users file stays its first daemon's).
  size_t StartLate(ClusterMesh& mesh, size_t member_index) {
    const mesh::testing::NatsServer& member = mesh.cluster().member(member_index);
    daemons_.push_back(
        DaemonProcess::Start({"--records", mesh.records_path(), "--bus", member.url(), "--user",
                              kReconcilerUser, "--monitor", member.monitor_url(), "--token-file",
                              token_path_, "--interval", "1s", "--lease"},
                             {std::string("MESH_RECONCILER_PASSWORD=") + kReconcilerPassword}));
    return daemons_.size() - 1;
  }
  const std::string& token_path() const { return token_path_; }

  size_t size() const { return daemons_.size(); }
  bool alive(size_t i) const { return daemons_[i] != nullptr; }
  DaemonProcess& daemon(size_t i) { return *daemons_[i]; }
  void Kill(size_t i) {
    daemons_[i]->Kill();
    daemons_[i].reset();
  }
  std::string Logs() const {
    std::string out;
    for (size_t i = 0; i < daemons_.size(); ++i) {
      if (daemons_[i]) out += "--- daemon " + std::to_string(i) + "\n" + daemons_[i]->log();
    }
    return out;
  }

  // POST /reconcile: a pass that started after the call.
  Result<PassReport> Reconcile(size_t i) {
    auto reply = daemons_[i]->Post("/reconcile", kAdminToken);
    if (!reply.ok()) return reply.status();
    if (reply->status != 200) {
      return Status(Errc::kInternal, "HTTP " + std::to_string(reply->status) + ": " + reply->body);
    }
    return ReportFromJson(reply->body);
  }

  // The live daemons whose metric says they hold the lease.
  std::vector<size_t> Holders() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < daemons_.size(); ++i) {
      if (daemons_[i] && daemons_[i]->Metric(kLeaseHolder).value_or(0) == 1) out.push_back(i);
    }
    return out;
  }

  double Sum(const std::string& name) const {
    double sum = 0;
    for (const auto& daemon : daemons_) {
      if (!daemon) continue;
      auto metrics = daemon->Get("/metrics");
      if (metrics.ok() && metrics->status == 200) sum += SumOf(metrics->body, name);
    }
    return sum;
  }

  // Until every live daemon's forced pass converges and exactly one holds the lease.
  void WaitConvergedWithOneHolder() {
    std::string last;
    const bool done = WaitFor(
        [&] {
          for (size_t i = 0; i < daemons_.size(); ++i) {
            if (!daemons_[i]) continue;
            Result<PassReport> report = Reconcile(i);
            if (!report.ok() || !report->converged()) {
              last = "daemon " + std::to_string(i) + ": " +
                     (report.ok() ? FormatReportTable(*report) : report.status().ToString());
              return false;
            }
          }
          const size_t holders = Holders().size();
          last = std::to_string(holders) + " daemons report holding the lease";
          return holders == 1;
        },
        kConvergeDeadline);
    INFO(last);
    INFO(Logs());
    REQUIRE(done);
  }

 private:
  std::string token_path_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

void DeleteStream(observers::BusConnection& bus, const std::string& name) {
  observers::ApiReply reply = bus.Request({"$JS.API.STREAM.DELETE." + name, ""});
  INFO(reply.status.ToString() << " " << reply.payload);
  REQUIRE(reply.status.ok());
  REQUIRE(reply.payload.find("\"success\":true") != std::string::npos);
}

bool StreamExists(observers::BusConnection& bus, const std::string& name) {
  observers::ApiReply reply = bus.Request({"$JS.API.STREAM.INFO." + name, ""});
  return reply.status.ok() && reply.payload.find("\"error\"") == std::string::npos;
}

TEST_CASE("Three leased daemons on a 3-node cluster: one acts, each repair happens exactly once",
          "[cluster][integration][server]") {
  ClusterMesh mesh(ClusterRecordsJson());
  Pods pods(mesh);
  pods.WaitConvergedWithOneHolder();

  CreationCounter advisories(mesh, 0);
  std::unique_ptr<observers::BusConnection> admin = mesh.Connect(0);

  // Converged: many passes on every daemon, and not one repair anywhere.
  const double repairs_before = pods.Sum("mesh_reconciler_repairs_total");
  for (int round = 0; round < kQuietPasses; ++round) {
    for (size_t i = 0; i < pods.size(); ++i) {
      Result<PassReport> report = pods.Reconcile(i);
      INFO("daemon " << i << ": " << report.status().ToString());
      REQUIRE(report.ok());
      CHECK(report->outcomes.empty());
      CHECK(report->converged());
    }
  }
  CHECK(pods.Sum("mesh_reconciler_repairs_total") == repairs_before);

  // A deleted stream: recreated by the holder alone, exactly once.
  const std::string first = mesh.desired().streams.back().name.str();
  const double creates_before = pods.Sum(kStreamCreates);
  DeleteStream(*admin, first);
  REQUIRE(WaitFor([&] { return StreamExists(*admin, first); }, kRepairDeadline));
  pods.WaitConvergedWithOneHolder();  // every daemon has passed after the repair
  CHECK(advisories.Created(first) == 1);
  CHECK(pods.Sum(kStreamCreates) == creates_before + 1);

  // The holder's daemon dies: another takes the lease once the entry ages out, and repairs.
  const std::vector<size_t> holders = pods.Holders();
  REQUIRE(holders.size() == 1);
  const size_t holder = holders.front();
  pods.Kill(holder);
  const std::string second = mesh.desired().streams.front().name.str();
  DeleteStream(*admin, second);
  {
    INFO(pods.Logs());
    REQUIRE(WaitFor([&] { return StreamExists(*admin, second); }, kRepairDeadline));
  }
  pods.WaitConvergedWithOneHolder();
  CHECK(advisories.Created(second) == 1);
  const std::vector<size_t> now_holding = pods.Holders();
  REQUIRE(now_holding.size() == 1);
  CHECK(now_holding.front() != holder);
}

// ---------- issue 37 item 1: one hold for the whole bus ----------

// The CLI as on-call types it, against daemon `i`.
CliResult OnCall(Pods& pods, size_t i, std::vector<std::string> args) {
  args.insert(args.end(), {"--remote", pods.daemon(i).url(), "--token-file", pods.token_path()});
  return RunCli(args, seconds(60));
}

// A forced pass on daemon `i` that acted on nothing and still sees `stream` missing.
void ExpectHeldPass(Pods& pods, size_t i, const std::string& stream) {
  Result<PassReport> report = pods.Reconcile(i);
  INFO("daemon " << i << ": " << report.status().ToString());
  REQUIRE(report.ok());
  INFO(FormatReportTable(*report));
  CHECK(report->outcomes.empty());
  CHECK_FALSE(report->converged());
  CHECK(FormatReportTable(*report).find(stream) != std::string::npos);
}

TEST_CASE("A hold for the whole bus holds every replica, one started later too, until released",
          "[cluster][integration][server][hold]") {
  ClusterMesh mesh(ClusterRecordsJson());
  Pods pods(mesh);
  pods.WaitConvergedWithOneHolder();
  CreationCounter advisories(mesh, 0);
  std::unique_ptr<observers::BusConnection> admin = mesh.Connect(0);

  // Held through daemon 0: the command returns once the record is written for the bus.
  const CliResult held = OnCall(pods, 0, {"hold", "--for", "10m", "--reason", "restoring DECL"});
  INFO(held.output << "\n" << pods.Logs());
  REQUIRE(held.exit_code == 0);
  CHECK(held.output.find("held the bus until") != std::string::npos);

  // A deletion: every replica's next pass sees it and repairs nothing, the holder included.
  const std::string stream = mesh.desired().streams.back().name.str();
  const double creates_before = pods.Sum(kStreamCreates);
  DeleteStream(*admin, stream);
  for (size_t i = 0; i < pods.size(); ++i) ExpectHeldPass(pods, i, stream);
  CHECK(pods.Sum("mesh_reconciler_bus_held") == 3);
  CHECK(pods.Sum("mesh_reconciler_held") == 3);

  // A pod started meanwhile starts held.
  const size_t late = pods.StartLate(mesh, 1);
  ExpectHeldPass(pods, late, stream);
  CHECK(pods.daemon(late).Metric("mesh_reconciler_bus_held") == 1);
  const auto drift = pods.daemon(late).Get("/drift");
  REQUIRE(drift.ok());
  CHECK(drift->body.find("\"scope\":\"bus\"") != std::string::npos);
  CHECK(drift->body.find("restoring DECL") != std::string::npos);
  // status, read-only, says so in its first line.
  const CliResult status = RunCli({"status", "--remote", pods.daemon(late).url()}, seconds(60));
  CHECK(status.exit_code == 2);  // the deletion is drift
  CHECK(status.output.find("held:       yes, bus hold") != std::string::npos);
  CHECK_FALSE(StreamExists(*admin, stream));

  // Released through another replica: the stream is recreated, exactly once.
  const CliResult released = OnCall(pods, 2, {"release", "--reason", "restore done"});
  INFO(released.output);
  REQUIRE(released.exit_code == 0);
  REQUIRE(WaitFor([&] { return StreamExists(*admin, stream); }, kRepairDeadline));
  pods.WaitConvergedWithOneHolder();  // every daemon has passed after the repair
  CHECK(advisories.Created(stream) == 1);
  CHECK(pods.Sum(kStreamCreates) == creates_before + 1);
  CHECK(pods.Sum("mesh_reconciler_bus_held") == 0);
  CHECK(pods.Sum("mesh_reconciler_held") == 0);
}

}  // namespace
}  // namespace mesh::reconciler::test
