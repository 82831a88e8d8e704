#include "tests/support/nats_cluster.h"

#include <nats/nats.h>

#include <algorithm>
#include <iostream>
#include <set>
#include <stdexcept>

#include "observers/http_client.h"
#include "tests/support/nats_client.h"

namespace mesh::testing {
namespace {

constexpr auto kProbeTimeout = std::chrono::seconds(2);
// Once every member is in the meta group, placement follows in about a second.
constexpr auto kPlacementDeadline = std::chrono::seconds(60);
// How long a ready cluster may take to count every member in its meta group before the
// fixture restarts the one left out (a good formation takes under 2 s; see RequireFormed).
constexpr auto kMembershipGrace = std::chrono::seconds(10);
constexpr auto kMembershipDeadline = std::chrono::seconds(60);
constexpr size_t kLogTailBytes = 3000;

bool Healthy(const NatsServer& server) {
  auto health = observers::HttpGet(server.monitor_url() + "/healthz", kProbeTimeout);
  return health.ok() && health->status == 200;
}

// What a member's /jsz says of the JetStream meta group; nullopt when it is stopped, does not
// answer, or names no meta group.
struct MetaCluster {
  std::string leader;       // empty when it names none
  std::optional<int> size;  // cluster_size, when reported
};

std::optional<MetaCluster> MetaClusterSeenBy(const NatsServer& server) {
  const std::optional<Jsz> jsz = JszOf(server);
  if (!jsz || !jsz->has_meta) return std::nullopt;
  return MetaCluster{jsz->meta_leader, jsz->meta_size};
}

}  // namespace

std::unique_ptr<NatsCluster> NatsCluster::Start(const NatsClusterOptions& options) {
  if (options.size < 1) throw std::invalid_argument("a cluster needs at least one member");
  std::unique_ptr<NatsCluster> cluster(new NatsCluster());
  std::vector<int> cluster_ports;
  for (size_t i = 0; i < options.size; ++i) cluster_ports.push_back(FreePort());
  for (size_t i = 0; i < options.size; ++i) {
    NatsServerOptions member;
    member.users_conf = options.users_conf;
    member.server_name = "n" + std::to_string(cluster_ports[i]);
    member.cluster_name = options.cluster_name;
    // A tag per member, so that a test can place a stream on a member of its choice
    // ("placement": {"tags": ["member:1"]}).
    member.extra_config = "server_tags: [\"member:" + std::to_string(i) + "\"]\n";
    member.cluster_port = cluster_ports[i];
    for (size_t j = 0; j < options.size; ++j) {
      if (j != i) member.route_ports.push_back(cluster_ports[j]);
    }
    // A member alone is never healthy (no meta leader): wait for all of them together below.
    member.wait_healthy = false;
    cluster->names_.push_back(member.server_name);
    cluster->members_.push_back(NatsServer::Start(member));
  }
  cluster->options_ = options;
  cluster->RequireFormed();
  return cluster;
}

std::optional<std::vector<size_t>> NatsCluster::OutsideMetaGroup() const {
  std::string leader;
  for (size_t i = 0; i < members_.size() && leader.empty(); ++i) {
    if (members_[i]->running()) leader = MetaLeaderSeenBy(i);
  }
  const size_t leader_index = IndexOf(leader);
  if (leader_index == members_.size()) return std::nullopt;
  const std::optional<Jsz> view = JszOf(*members_[leader_index]);
  if (!view || view->meta_leader != leader) return std::nullopt;
  std::vector<size_t> outside;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (i == leader_index || !members_[i]->running()) continue;
    if (std::find(view->meta_replicas.begin(), view->meta_replicas.end(), names_[i]) ==
        view->meta_replicas.end()) {
      outside.push_back(i);
    }
  }
  return outside;
}

void NatsCluster::RequireFormed() {
  RequireReady();
  std::optional<std::vector<size_t>> outside;
  auto all_inside = [&] {
    outside = OutsideMetaGroup();
    return outside && outside->empty();
  };
  if (!WaitFor(all_inside, kMembershipGrace) && outside) {
    for (size_t index : *outside) {
      std::cerr << "nats cluster fixture: " << names_[index]
                << " is ready but outside the JetStream meta group " << kMembershipGrace.count()
                << " s after forming (the nats-server formation race in nats_cluster.h); "
                   "restarting it once\n";
      members_[index]->Restart();
    }
    RequireReady();
  }
  if (!WaitFor(all_inside, kMembershipDeadline)) {
    std::string who;
    for (size_t index : outside.value_or(std::vector<size_t>{})) who += names_[index] + " ";
    throw std::runtime_error("the JetStream meta group does not count every member (outside: " +
                             (outside ? who : std::string("no leader's view")) + ")\nlogs:\n" +
                             LogTails());
  }
  RequirePlacement();
}

void NatsCluster::RequirePlacement() const {
  const NatsClusterOptions& options = options_;
  if (options.size < 2) return;
  NatsConnectionPtr connection;
  std::string refused;
  for (const auto& [user, password] : options.probe_users) {
    try {
      connection = ConnectNats(urls(), user, password);
      break;
    } catch (const std::exception& e) {
      refused += std::string(e.what()) + "; ";
    }
  }
  if (!connection) throw std::runtime_error("placement probe: no probe user connects: " + refused);
  const std::string name = "FIXTURE_PLACEMENT_PROBE";
  const std::string config = R"({"name":")" + name +
                             R"(","subjects":["fixture.placement.probe"],"storage":"memory",)" +
                             R"("num_replicas":)" + std::to_string(options.size) + "}";
  std::string last;
  auto request = [&](const std::string& subject, const std::string& payload) {
    natsMsg* raw = nullptr;
    const natsStatus s =
        natsConnection_Request(&raw, connection.get(), subject.c_str(), payload.data(),
                               static_cast<int>(payload.size()), 5000);
    if (s != NATS_OK) return std::string("no answer: ") + natsStatus_GetText(s);
    std::string reply(natsMsg_GetData(raw), static_cast<size_t>(natsMsg_GetDataLength(raw)));
    natsMsg_Destroy(raw);
    return reply;
  };
  const bool placed = WaitFor(
      [&] {
        last = request("$JS.API.STREAM.CREATE." + name, config);
        return last.find("\"error\"") == std::string::npos && last.find("no answer") != 0;
      },
      kPlacementDeadline);
  if (!placed) {
    throw std::runtime_error("the JetStream cluster could not place " +
                             std::to_string(options.size) + " replicas within " +
                             std::to_string(kPlacementDeadline.count()) + " s: " + last +
                             "\nlogs:\n" + LogTails());
  }
  const std::string deleted = request("$JS.API.STREAM.DELETE." + name, "");
  if (deleted.find("\"success\":true") == std::string::npos) {
    throw std::runtime_error("could not delete the placement probe: " + deleted);
  }
}

NatsCluster::~NatsCluster() {
  StopAll();
}

std::vector<std::string> NatsCluster::urls() const {
  std::vector<std::string> out;
  for (const auto& member : members_) out.push_back(member->url());
  return out;
}

std::string NatsCluster::ServerName(size_t index) const {
  return names_.at(index);
}

size_t NatsCluster::IndexOf(const std::string& name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return i;
  }
  return names_.size();
}

std::string NatsCluster::MetaLeaderSeenBy(size_t index) const {
  const std::optional<MetaCluster> meta = MetaClusterSeenBy(*members_.at(index));
  return meta ? meta->leader : "";
}

std::optional<int> NatsCluster::MetaSizeSeenBy(size_t index) const {
  const std::optional<MetaCluster> meta = MetaClusterSeenBy(*members_.at(index));
  return meta ? meta->size : std::nullopt;
}

bool NatsCluster::AgreeOnMetaLeader() const {
  std::set<std::string> leaders;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (!members_[i]->running()) continue;
    const std::string leader = MetaLeaderSeenBy(i);
    if (leader.empty()) return false;
    leaders.insert(leader);
  }
  return leaders.size() == 1;
}

bool NatsCluster::WaitReady(std::chrono::milliseconds deadline) const {
  return WaitFor(
      [&] {
        for (const auto& member : members_) {
          if (member->running() && !Healthy(*member)) return false;
        }
        return AgreeOnMetaLeader();
      },
      deadline);
}

void NatsCluster::RequireRejoined(size_t healthy, std::chrono::milliseconds deadline) const {
  const bool rejoined =
      WaitFor([&] { return Healthy(*members_.at(healthy)) && AgreeOnMetaLeader(); }, deadline);
  if (!rejoined) {
    throw std::runtime_error("the member did not rejoin the JetStream cluster; logs:\n" +
                             LogTails());
  }
}

void NatsCluster::RequireReady(std::chrono::milliseconds deadline) const {
  if (!WaitReady(deadline)) {
    // What each member said at the end, then the logs.
    std::string state;
    for (size_t i = 0; i < members_.size(); ++i) {
      const std::optional<int> size = MetaSizeSeenBy(i);
      state += names_[i] + ": running=" + (members_[i]->running() ? "yes" : "no") +
               " healthy=" + (members_[i]->running() && Healthy(*members_[i]) ? "yes" : "no") +
               " meta_leader=" + MetaLeaderSeenBy(i) +
               " meta_cluster_size=" + (size ? std::to_string(*size) : "-") + "\n";
    }
    throw std::runtime_error("the JetStream cluster did not become ready:\n" + state + "logs:\n" +
                             LogTails());
  }
}

void NatsCluster::StartStopped() {
  for (auto& member : members_) {
    if (!member->running()) member->Restart();
  }
}

void NatsCluster::StopAll() {
  for (auto& member : members_) member->Stop();
}

void NatsCluster::WipeAllStores() {
  for (auto& member : members_) member->WipeStore();
}

std::string NatsCluster::LogTails() const {
  std::string out;
  for (size_t i = 0; i < members_.size(); ++i) {
    std::string log;
    try {
      log = ReadFile(members_[i]->log_file());
    } catch (const std::exception&) {
      log = "(no log)";
    }
    if (log.size() > kLogTailBytes) log = "..." + log.substr(log.size() - kLogTailBytes);
    out += "--- " + names_[i] + " (" + members_[i]->dir() + ")\n" + log + "\n";
  }
  return out;
}

}  // namespace mesh::testing
