// Shared fixtures of the plan, apply and pass tests: records (the example and generated
// meshes), a users file rendered with stand-in hashes (pure tests) or real bcrypt (integration),
// an observation built from the desired state (a converged bus), and a real nats-server whose
// users file is rendered from the test's records, the reconciler's own user included, so that
// the reconciler connects as itself with its real restricted permissions.
//
// Header-only (the test glob compiles only *_test.cc). Thread-safety: test thread only.
#pragma once

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/support/observed_gen.h"
#include "model/desired.h"
#include "model/records.h"
#include "model/users_file.h"
#include "observers/observed.h"
#include "reconciler/cli/settings.h"
#include "tests/support/nats_server.h"

namespace mesh::reconciler::test {

inline constexpr char kReconcilerUser[] = "mesh-reconciler";
inline constexpr char kReconcilerPassword[] = "test-only-reconciler-password";
inline constexpr int kCheapCost = 4;  // bcrypt's smallest cost: fast tests

inline std::string ExampleRecordsJson() {
  return mesh::testing::ReadFile(std::string(MESH_SOURCE_DIR) + "/examples/records.json");
}

inline model::Records ParseOrFail(const std::string& json) {
  model::ParseOptions options;
  options.reconciler_user = kReconcilerUser;
  model::ParseOutcome outcome = model::ParseRecords(json, options);
  std::string errors;
  for (const auto& e : outcome.errors) errors += "  " + e.ToString() + "\n";
  INFO(errors);
  REQUIRE(outcome.ok());
  return std::move(outcome.records);
}

inline model::ReconcilerIdentity Identity() {
  model::ReconcilerIdentity identity;
  identity.user = UserName(kReconcilerUser);
  identity.credential = {model::Credential::Kind::kPlain, kReconcilerPassword};
  return identity;
}

inline model::DesiredState DesiredFrom(const std::string& json) {
  return model::Derive(ParseOrFail(json), Identity());
}

// Records of a generated mesh: `nodes` nodes, `modules` modules of `seats` seats each, roles
// held by nodes, and follows between them. Deterministic for a seed; always valid.
inline std::string GeneratedRecordsJson(uint32_t seed, int nodes, int modules, int seats,
                                        int replicas = 1) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  auto quoted = [](const std::string& s) { return "\"" + s + "\""; };
  auto list = [&](const std::vector<std::string>& items) {
    std::string out = "[";
    for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + quoted(items[i]);
    return out + "]";
  };
  std::vector<std::string> all_seats;  // "<seat>" with event "done"
  for (int m = 0; m < modules; ++m) {
    for (int s = 0; s < seats; ++s) {
      all_seats.push_back("m" + std::to_string(m) + "-s" + std::to_string(s));
    }
  }
  const int roles = 1 + pick(3);
  for (int r = 0; r < roles; ++r) all_seats.push_back("mesh-r" + std::to_string(r));
  auto some_follows = [&]() {
    std::vector<std::string> out;
    const int count = pick(3);
    for (int i = 0; i < count; ++i) out.push_back(all_seats[pick(all_seats.size())] + ".done");
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  std::string json = "{\"version\":1,\"mesh\":\"gen" + std::to_string(seed) +
                     "\",\"bus\":{\"replicas\":" + std::to_string(replicas) +
                     "},\"controller\":{\"user\":\"ctl\",\"password\":\"p-ctl\",\"submits_to\":" +
                     list({all_seats[pick(all_seats.size())]}) +
                     ",\"follows\":" + list(some_follows()) + "},\"nodes\":[";
  for (int n = 0; n < nodes; ++n) {
    json += (n ? "," : "") + std::string("{\"name\":\"node-") + std::to_string(n) + "\"" +
            (n % 5 == 4 ? "" : ",\"password\":\"p-node-" + std::to_string(n) + "\"") + "}";
  }
  json += "],\"modules\":[";
  for (int m = 0; m < modules; ++m) {
    json += (m ? "," : "") + std::string("{\"name\":\"mod-") + std::to_string(m) +
            "\",\"password\":\"p-mod-" + std::to_string(m) + "\",\"seats\":[";
    for (int s = 0; s < seats; ++s) {
      json += (s ? "," : "") + std::string("{\"name\":\"m") + std::to_string(m) + "-s" +
              std::to_string(s) + "\",\"accepts\":[\"job\"],\"emits\":[\"done\"],\"uses\":" +
              list({all_seats[pick(all_seats.size())]}) + "}";
    }
    json += "],\"follows\":" + list(some_follows()) + "}";
  }
  json += "],\"roles\":[";
  for (int r = 0; r < roles; ++r) {
    std::vector<std::string> holders;
    if (nodes > 0) holders.push_back("node-" + std::to_string(pick(nodes)));
    json +=
        (r ? "," : "") + std::string("{\"name\":\"mesh-r") + std::to_string(r) +
        "\",\"accepts\":[\"job\"],\"emits\":[\"done\"],\"uses\":[],\"holders\":" + list(holders) +
        "}";
  }
  return json + "]}";
}

// Stand-in hashes (shaped like bcrypt, never checked): rendering in pure tests needs no bcrypt.
inline model::HashedCredentials FakeHashes(const model::DesiredState& desired) {
  model::HashedCredentials hashes;
  for (const auto& p : desired.principals) {
    if (p.credential.kind != model::Credential::Kind::kNone) {
      hashes[p.user] = "$2b$04$stand.in.hash.for." + p.user.str();
    }
  }
  return hashes;
}

inline model::RenderedUsersFile FakeRendered(const model::DesiredState& desired) {
  auto rendered = model::RenderUsersFile(desired, FakeHashes(desired));
  REQUIRE(rendered.ok());
  return std::move(*rendered);
}

// The users file as the reconciler renders it (real bcrypt at the cheapest cost).
inline std::string RenderedUsersConf(const std::string& records_json, int cost = kCheapCost,
                                     model::UsersScope scope = model::UsersScope::kServer) {
  model::DesiredState desired = DesiredFrom(records_json);
  model::BcryptHasher hasher(kReconcilerPassword, cost);
  auto rendered = model::RenderUsersFileReusing(desired, "", hasher, scope);
  REQUIRE(rendered.ok());
  return rendered->bytes;
}

inline constexpr int64_t kFileMtime = mesh::testing::kConvergedUsersFileMtimeNs;

// What a converged bus looks like to the observers.
inline observers::ObservedState ObservedFrom(const model::DesiredState& desired,
                                             const model::RenderedUsersFile& rendered) {
  return mesh::testing::ConvergedObservation(desired, rendered.bytes);
}

// A real nats-server whose users.conf is the reconciler's rendering of `records_json`, and a
// folder holding the records file: the reconciler runs against it exactly as in production.
// `extra_config` goes into the server's main configuration (e.g. TlsServerConfig's tls block).
struct LiveMesh {
  std::unique_ptr<mesh::testing::NatsServer> server;
  std::string dir;           // holds records.json
  std::string records_path;  // dir + "/records.json"

  explicit LiveMesh(const std::string& records_json, const std::string& extra_config = "") {
    dir = mesh::testing::MakeTempDir("mesh-pass");
    records_path = dir + "/records.json";
    mesh::testing::WriteFile(records_path, records_json);
    mesh::testing::NatsServerOptions options;
    options.users_conf = RenderedUsersConf(records_json);
    options.extra_config = extra_config;
    // The Large mesh's DECL holds 2,000 consumers: on 2.15 the limit is raised, as a deployment
    // of such a mesh must (docs/conventions.md, "What differs per server version").
    options.default_max_consumers = 100000;
    server = mesh::testing::NatsServer::Start(options);
  }
  ~LiveMesh() {
    server.reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  void SetRecords(const std::string& records_json) const {
    mesh::testing::WriteFile(records_path, records_json);
  }

  // The reconciler's settings: itself on this server, managing its users file.
  Settings PassSettings() const {
    Settings settings;
    settings.records_path = records_path;
    settings.bus.urls = {server->url()};
    settings.bus.user = kReconcilerUser;
    settings.bus.password = kReconcilerPassword;
    settings.bus.request_timeout = std::chrono::seconds(5);
    settings.bus.connect_timeout = std::chrono::seconds(2);
    settings.users_file = server->users_file();
    settings.pid_file = server->pid_file();
    settings.monitor_url = server->monitor_url();
    settings.bcrypt_cost = kCheapCost;
    return settings;
  }
};

}  // namespace mesh::reconciler::test
