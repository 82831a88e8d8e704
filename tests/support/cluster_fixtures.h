// Shared fixtures of the cluster tests: a 3-node JetStream cluster on loopback whose members all
// hold the reconciler's rendering of the test's records (each member its own users file), the
// records file, and the reconciler's view of the bus.
//
// Header-only (the test glob compiles only *_test.cc). Thread-safety: test thread only.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "model/desired.h"
#include "observers/bus.h"
#include "observers/jetstream.h"
#include "reconciler/cli/settings.h"
#include "reconciler/pass/pass.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_cluster.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler::test {

inline constexpr int kClusterReplicas = 3;

// 2 nodes, 2 modules of 2 seats and some roles, every stream with 3 replicas.
inline std::string ClusterRecordsJson() {
  return GeneratedRecordsJson(11, 2, 2, 2, kClusterReplicas);
}

class ClusterMesh {
 public:
  // `users_conf`: every member's users file; empty: the reconciler's rendering of the records.
  explicit ClusterMesh(const std::string& records_json, const std::string& users_conf = "") {
    dir_ = mesh::testing::MakeTempDir("mesh-cluster");
    records_path_ = dir_ + "/records.json";
    mesh::testing::WriteFile(records_path_, records_json);
    mesh::testing::NatsClusterOptions options;
    options.size = 3;
    options.users_conf = users_conf.empty() ? RenderedUsersConf(records_json) : users_conf;
    // The reconciler's own user, as the records' rendering or the test support's users file
    // has it (admin is not in every one).
    options.probe_users = {{kReconcilerUser, kReconcilerPassword},
                           {mesh::testing::kReconcilerUser, mesh::testing::kReconcilerPassword},
                           {"admin", "admin"}};
    cluster_ = mesh::testing::NatsCluster::Start(options);
    desired_ = DesiredFrom(records_json);
  }
  ~ClusterMesh() {
    cluster_.reset();
    if (std::uncaught_exceptions() == 0) {
      std::error_code ignored;
      std::filesystem::remove_all(dir_, ignored);
    }
  }
  ClusterMesh(const ClusterMesh&) = delete;
  ClusterMesh& operator=(const ClusterMesh&) = delete;

  mesh::testing::NatsCluster& cluster() { return *cluster_; }
  const model::DesiredState& desired() const { return desired_; }
  const std::string& dir() const { return dir_; }
  const std::string& records_path() const { return records_path_; }

  // The reconciler on JetStream only (each member's users file stays as rendered), given every
  // member's URL and watching `monitored`'s monitoring endpoint.
  Settings PassSettings(size_t monitored) const {
    Settings settings;
    settings.records_path = records_path_;
    settings.bus.urls = cluster_->urls();
    settings.bus.user = kReconcilerUser;
    settings.bus.password = kReconcilerPassword;
    settings.bus.request_timeout = std::chrono::seconds(5);
    settings.bus.connect_timeout = std::chrono::seconds(2);
    settings.monitor_url = cluster_->member(monitored).monitor_url();
    settings.bcrypt_cost = kCheapCost;
    return settings;
  }

  // A connection as the reconciler's user to `member` alone.
  std::unique_ptr<observers::BusConnection> Connect(size_t member,
                                                    observers::EventSink events = nullptr) const {
    observers::BusSettings bus = PassSettings(member).bus;
    bus.urls = {cluster_->member(member).url()};
    auto connection = observers::BusConnection::Connect(bus, std::move(events));
    INFO(connection.status().ToString());
    REQUIRE(connection.ok());
    return std::move(*connection);
  }

  // What the bus holds now, observed as the reconciler through `member`.
  observers::ObservedJetStream Observe(size_t member = 0) const {
    auto connection = Connect(member);
    auto observed = observers::ObserveJetStream(*connection);
    INFO(observed.status().ToString());
    REQUIRE(observed.ok());
    return std::move(*observed);
  }

 private:
  std::string dir_;
  std::string records_path_;
  std::unique_ptr<mesh::testing::NatsCluster> cluster_;
  model::DesiredState desired_;
};

}  // namespace mesh::reconciler::test
