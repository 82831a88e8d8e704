// The store folder observer (--store-dir) on a real nats-server: where the server keeps a
// stream's store, which account our connection is in (/connz), and what a deletion leaves.
#include "observers/store_folder.h"

#include <catch2/catch.hpp>
#include <filesystem>

#include "observers/bus.h"
#include "observers/monitor.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

using testing::NatsServer;
constexpr auto kTimeout = std::chrono::seconds(2);

ApiReply Call(BusConnection& bus, const std::string& api, const std::string& payload = "") {
  ApiReply reply = bus.Request({"$JS.API." + api, payload});
  INFO(api << ": " << reply.status.ToString() << " " << reply.payload);
  REQUIRE(reply.status.ok());
  REQUIRE(reply.payload.find("\"error\"") == std::string::npos);
  return reply;
}

TEST_CASE("A stream's folder is where --store-dir says, and a deletion removes it",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  auto server = NatsServer::Start(options);
  auto bus = BusConnection::Connect(testing::BusSettingsFor(*server));
  REQUIRE(bus.ok());
  const std::optional<uint64_t> cid = (*bus)->client_id();
  REQUIRE(cid.has_value());
  Result<std::string> account = ObserveConnectionAccount(server->monitor_url(), *cid, kTimeout);
  INFO(account.status().ToString());
  REQUIRE(account.ok());
  CHECK(!account->empty());
  // Another connection id is not ours.
  CHECK_FALSE(ObserveConnectionAccount(server->monitor_url(), *cid + 1000, kTimeout).ok());

  Call(**bus, "STREAM.CREATE.KEEP", R"({"name":"KEEP","subjects":["keep.>"],"storage":"file"})");
  Call(**bus, "STREAM.CREATE.GONE", R"({"name":"GONE","subjects":["gone.>"],"storage":"file"})");
  Call(**bus, "CONSUMER.DURABLE.CREATE.GONE.d",
       R"({"stream_name":"GONE","config":{"durable_name":"d","ack_policy":"explicit"}})");
  const std::string folder = StreamsFolder(server->store_dir(), *account);
  INFO(folder);
  CHECK(StreamFolder(folder, StreamName("KEEP")).value() == StoreFolder::kPresent);
  CHECK(StreamFolder(folder, StreamName("GONE")).value() == StoreFolder::kPresent);
  CHECK(StreamFolder(folder, StreamName("NEVER")).value() == StoreFolder::kAbsent);
  CHECK(CheckStreamsFolder(folder, {StreamName("KEEP")}).ok());

  // The deletion's answer comes after the folder is gone (2.9: fileStore.Delete, synchronous).
  Call(**bus, "STREAM.DELETE.GONE");
  CHECK(StreamFolder(folder, StreamName("GONE")).value() == StoreFolder::kAbsent);
  CHECK(StreamFolder(folder, StreamName("KEEP")).value() == StoreFolder::kPresent);

  // A mount that is not this server's store holds none of its streams: refused, so that an
  // absent folder there is never taken for a finished deletion.
  const std::string elsewhere = testing::MakeTempDir("mesh-not-a-store");
  CHECK_FALSE(CheckStreamsFolder(StreamsFolder(elsewhere, *account), {StreamName("KEEP")}).ok());
  std::filesystem::create_directories(StreamsFolder(elsewhere, *account));
  const Status empty = CheckStreamsFolder(StreamsFolder(elsewhere, *account), {StreamName("KEEP")});
  CHECK_FALSE(empty.ok());
  CHECK(empty.message().find("not this server's store") != std::string::npos);
  CHECK_FALSE(CheckStreamsFolder(folder, {}).ok());  // nothing to recognise it by
  std::filesystem::remove_all(elsewhere);
}

}  // namespace
}  // namespace mesh::observers
