// The server version and the capabilities decided from it, in one place; and the INFO probe
// against a real nats-server (the one the suite runs: $MESH_NATS_SERVER or Debian's 2.9.10).
#include "observers/server_version.h"

#include <catch2/catch.hpp>

#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

TEST_CASE("ParseServerVersion reads release, v-prefixed and pre-release versions", "[observers]") {
  CHECK(ParseServerVersion("2.9.10") == ServerVersion{2, 9, 10});
  CHECK(ParseServerVersion("v2.10.27") == ServerVersion{2, 10, 27});
  CHECK(ParseServerVersion("2.12.0-RC.1") == ServerVersion{2, 12, 0});
  CHECK(ParseServerVersion("2.14") == ServerVersion{2, 14, 0});
  CHECK_FALSE(ParseServerVersion("").has_value());
  CHECK_FALSE(ParseServerVersion("two.ten").has_value());
  CHECK_FALSE(ParseServerVersion("2").has_value());
  CHECK_FALSE(ParseServerVersion("2.10.x").has_value());
  CHECK(ServerVersion{2, 10, 27}.ToString() == "2.10.27");
  CHECK(ServerVersion{2, 9, 10} < ServerVersion{2, 10, 0});
}

TEST_CASE("ParseInfo takes a greeting's JSON object and nothing else", "[observers]") {
  auto info = ParseInfo("INFO {\"tls_required\":true}\r\n");
  REQUIRE(info);
  CHECK((*info)["tls_required"].GetBool());
  CHECK_FALSE(ParseInfo("INFO [1]\r\n"));
  CHECK_FALSE(ParseInfo("-ERR 'nope'\r\n"));
  CHECK_FALSE(ParseInfo("INFO \r\n"));
  CHECK_FALSE(ParseInfo(""));
}

TEST_CASE("ParseInfoVersion reads the version of a server's INFO greeting", "[observers]") {
  CHECK(ParseInfoVersion("INFO {\"server_id\":\"N\",\"version\":\"2.10.27\",\"proto\":1}\r\n") ==
        ServerVersion{2, 10, 27});
  CHECK_FALSE(ParseInfoVersion("INFO {\"server_id\":\"N\"}\r\n").has_value());
  CHECK_FALSE(ParseInfoVersion("-ERR 'nope'\r\n").has_value());
  CHECK_FALSE(ParseInfoVersion("INFO {bad\r\n").has_value());
}

TEST_CASE("consumer actions from 2.10.0 on, never before", "[observers]") {
  CHECK_FALSE(SupportsConsumerActions({2, 9, 10}));
  CHECK_FALSE(SupportsConsumerActions({2, 9, 99}));
  CHECK(SupportsConsumerActions({2, 10, 0}));
  CHECK(SupportsConsumerActions({2, 10, 27}));
  CHECK(SupportsConsumerActions({2, 14, 0}));
  CHECK(SupportsConsumerActions({3, 0, 0}));
}

TEST_CASE("a connection's API requests are handled in place up to 2.11.9, by a pool after",
          "[observers]") {
  // server/jetstream_api.go, apiDispatch(), at v2.11.9 and v2.11.10 (commit b7600b763).
  CHECK(HandlesApiRequestsInPlace(ServerVersion{2, 9, 10}));
  CHECK(HandlesApiRequestsInPlace(ServerVersion{2, 10, 27}));
  CHECK(HandlesApiRequestsInPlace(ServerVersion{2, 11, 9}));
  CHECK_FALSE(HandlesApiRequestsInPlace(ServerVersion{2, 11, 10}));
  CHECK_FALSE(HandlesApiRequestsInPlace(ServerVersion{2, 12, 0}));
  CHECK_FALSE(HandlesApiRequestsInPlace(ServerVersion{2, 14, 0}));
  CHECK(HandlesApiRequestsInPlace(std::nullopt));  // unknown: lanes work on every version
}

TEST_CASE("the meta query of /healthz fails while an entry is applied up to 2.9.15",
          "[observers]") {
  CHECK(MetaHealthzFailsWhileApplying(ServerVersion{2, 9, 10}));
  CHECK(MetaHealthzFailsWhileApplying(ServerVersion{2, 9, 15}));
  CHECK_FALSE(MetaHealthzFailsWhileApplying(ServerVersion{2, 9, 16}));
  CHECK_FALSE(MetaHealthzFailsWhileApplying(ServerVersion{2, 10, 27}));
  CHECK_FALSE(MetaHealthzFailsWhileApplying(ServerVersion{2, 15, 1}));
  CHECK(MetaHealthzFailsWhileApplying(std::nullopt));  // unknown: as 2.9.10
}

TEST_CASE("stores on disk in /healthz from 2.10, before it a deletion's answer marks the removal",
          "[observers]") {
  for (Topology topology : {Topology::kStandalone, Topology::kClustered}) {
    const bool standalone = topology == Topology::kStandalone;
    CHECK_FALSE(HealthzShowsStoresOnDisk(ServerVersion{2, 9, 10}, topology));
    CHECK(HealthzShowsStoresOnDisk(ServerVersion{2, 10, 0}, topology) == standalone);
    CHECK(HealthzShowsStoresOnDisk(ServerVersion{2, 15, 1}, topology) == standalone);
    CHECK_FALSE(HealthzShowsStoresOnDisk(std::nullopt, topology));
    // A cluster's meta leader answers once the deletion is proposed: never a mark.
    CHECK(DeletionAnswerMarksStoreRemoved(ServerVersion{2, 9, 10}, topology) == standalone);
    CHECK(DeletionAnswerMarksStoreRemoved(std::nullopt, topology) == standalone);
    CHECK_FALSE(DeletionAnswerMarksStoreRemoved(ServerVersion{2, 10, 0}, topology));
    CHECK_FALSE(DeletionAnswerMarksStoreRemoved(ServerVersion{2, 15, 1}, topology));
  }
}

TEST_CASE("ProbeServerVersion reads the running server's version, without credentials",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  auto server = testing::NatsServer::Start(options);
  auto version = ProbeServerVersion(server->url(), std::chrono::seconds(5));
  REQUIRE(version.ok());
  auto varz = testing::ReadFile(server->log_file());
  // The server logs its version at start: "Version:  2.9.10".
  CHECK(varz.find("Version:  " + version->ToString()) != std::string::npos);

  server->Stop();
  CHECK_FALSE(ProbeServerVersion(server->url(), std::chrono::seconds(2)).ok());
}

}  // namespace
}  // namespace mesh::observers
