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

// Issue 37 item 5: the folder nats-server prints at start ("Store Directory", which ends in
// jetstream) was taken as the store_dir, and the first recreation looked in
// .../jetstream/jetstream/<account>/streams and settled. The folder is now read at start: the
// store_dir is taken, the printed folder is taken as its parent, and a folder without the layout
// is refused with what was expected and found.
TEST_CASE("The --store-dir check: the store_dir, the folder the server prints, a wrong folder",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  auto server = NatsServer::Start(options);
  const std::string printed = server->store_dir() + "/jetstream";  // "Store Directory"
  REQUIRE(testing::WaitFor([&] { return std::filesystem::is_directory(printed); }));
  INFO(testing::ReadFile(server->log_file()));
  REQUIRE(testing::ReadFile(server->log_file()).find("\"" + printed + "\"") != std::string::npos);

  // Before the first stream the server has made no account folder: accepted as given.
  Result<StoreDir> fresh = InspectStoreDir(server->store_dir());
  REQUIRE(fresh.ok());
  CHECK(fresh->layout == StoreDirLayout::kStore);
  CHECK(fresh->accounts.empty());
  Result<StoreDir> fresh_printed = InspectStoreDir(printed);
  REQUIRE(fresh_printed.ok());
  CHECK(fresh_printed->layout == StoreDirLayout::kNotCreatedYet);

  auto bus = BusConnection::Connect(testing::BusSettingsFor(*server));
  REQUIRE(bus.ok());
  Result<std::string> account =
      ObserveConnectionAccount(server->monitor_url(), *(*bus)->client_id(), kTimeout);
  REQUIRE(account.ok());
  Call(**bus, "STREAM.CREATE.KEEP", R"({"name":"KEEP","subjects":["keep.>"],"storage":"file"})");

  Result<StoreDir> store = InspectStoreDir(server->store_dir() + "/");
  REQUIRE(store.ok());
  CHECK(store->layout == StoreDirLayout::kStore);
  CHECK(store->path == server->store_dir());
  CHECK(store->accounts == std::vector<std::string>{*account});

  Result<StoreDir> from_printed = InspectStoreDir(printed);
  INFO(from_printed.status().ToString());
  REQUIRE(from_printed.ok());
  CHECK(from_printed->layout == StoreDirLayout::kPrintedFolder);
  CHECK(from_printed->path == server->store_dir());
  CHECK(from_printed->accounts == std::vector<std::string>{*account});
  CHECK(StreamFolder(StreamsFolder(from_printed->path, *account), StreamName("KEEP")).value() ==
        StoreFolder::kPresent);

  // An account's folder, or its streams folder: refused, with the folder to give.
  for (const std::string& inner :
       {printed + "/" + *account, printed + "/" + *account + "/streams"}) {
    Result<StoreDir> refused = InspectStoreDir(inner);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == Errc::kInvalidArgument);
    CHECK(refused.status().message().find("give " + server->store_dir()) != std::string::npos);
  }

  // A wrong folder: what was expected and what was found.
  const std::string elsewhere = testing::MakeTempDir("mesh-not-a-store");
  testing::WriteFile(elsewhere + "/notes.txt", "x");
  Result<StoreDir> wrong = InspectStoreDir(elsewhere);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.status().message().find("expected nats-server's store_dir") != std::string::npos);
  CHECK(wrong.status().message().find("found no jetstream/ folder but notes.txt") !=
        std::string::npos);
  Result<StoreDir> missing = InspectStoreDir(elsewhere + "/absent");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message().find("found no such folder") != std::string::npos);
  // An empty folder (a data volume before the server's first start): accepted as given.
  std::filesystem::remove(elsewhere + "/notes.txt");
  std::filesystem::create_directory(elsewhere + "/lost+found");
  Result<StoreDir> empty = InspectStoreDir(elsewhere);
  REQUIRE(empty.ok());
  CHECK(empty->layout == StoreDirLayout::kNotCreatedYet);
  std::filesystem::remove_all(elsewhere);
}

}  // namespace
}  // namespace mesh::observers
