// BusConnection against a real nats-server: credentials, the custom inbox prefix, pipelined
// requests, timeouts, advisories and reconnects.
#include "observers/bus.h"

#include <nats/nats.h>
#include <rapidjson/document.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <future>
#include <mutex>
#include <thread>

#include "observers/c_handle.h"
#include "observers/http_client.h"
#include "observers/server_version.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

using testing::BusSettingsFor;
using testing::NatsServer;
using testing::WaitFor;

using ConnectionPtr = CHandle<natsConnection, natsConnection_Destroy>;
using SubscriptionPtr = CHandle<natsSubscription, natsSubscription_Destroy>;

// A plain cnats connection of the unrestricted "admin" user.
ConnectionPtr ConnectAdmin(const NatsServer& server) {
  natsConnection* raw = nullptr;
  REQUIRE(natsConnection_ConnectTo(
              &raw, ("nats://admin:admin@127.0.0.1:" + std::to_string(server.port())).c_str()) ==
          NATS_OK);
  return ConnectionPtr(raw);
}

// A subscription of `connection` to `subject`: delivered to `handler`, or kept for NextMsg when
// it is null.
SubscriptionPtr Subscribe(const ConnectionPtr& connection, const char* subject,
                          natsMsgHandler handler = nullptr, void* closure = nullptr) {
  natsSubscription* sub = nullptr;
  REQUIRE((handler ? natsConnection_Subscribe(&sub, connection.get(), subject, handler, closure)
                   : natsConnection_SubscribeSync(&sub, connection.get(), subject)) == NATS_OK);
  return SubscriptionPtr(sub);
}

// An unrestricted client ("admin") that answers "echo.<n>" with "<n>", holding requests back and
// answering each batch of kBatch in reverse order so that replies arrive out of order. It also
// subscribes "silent.>" and never answers.
class Responder {
 public:
  static constexpr int kBatch = 4;

  explicit Responder(const NatsServer& server)
      : connection_(ConnectAdmin(server)),
        echo_(Subscribe(connection_, "echo.*", OnEcho, this)),
        silent_(Subscribe(connection_, "silent.>")) {
    REQUIRE(natsConnection_Flush(connection_.get()) == NATS_OK);
  }
  ~Responder() {
    echo_.reset();
    silent_.reset();
  }
  int max_outstanding() const { return max_outstanding_; }

 private:
  static void OnEcho(natsConnection* nc, natsSubscription*, natsMsg* msg, void* closure) {
    auto* self = static_cast<Responder*>(closure);
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->pending_.push_back(msg);
    ++self->received_;
    self->max_outstanding_ = std::max(self->max_outstanding_, self->received_ - self->answered_);
    if (self->pending_.size() < kBatch) return;
    for (auto it = self->pending_.rbegin(); it != self->pending_.rend(); ++it) {
      std::string subject = natsMsg_GetSubject(*it);
      std::string n = subject.substr(subject.find('.') + 1);
      natsConnection_Publish(nc, natsMsg_GetReply(*it), n.data(), static_cast<int>(n.size()));
      natsMsg_Destroy(*it);
      ++self->answered_;
    }
    self->pending_.clear();
  }

  ConnectionPtr connection_;
  SubscriptionPtr echo_;
  SubscriptionPtr silent_;
  std::mutex mutex_;
  std::vector<natsMsg*> pending_;
  int received_ = 0;
  int answered_ = 0;
  int max_outstanding_ = 0;
};

std::unique_ptr<NatsServer> StartServer() {
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  return NatsServer::Start(options);
}

// Events seen by an EventSink, safe to read from the test thread.
class EventLog {
 public:
  EventSink Sink() {
    return [this](BusEvent event, const std::string& subject) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.emplace_back(event, subject);
    };
  }
  bool Has(BusEvent event, const std::string& subject_prefix = "") {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::any_of(events_.begin(), events_.end(), [&](const auto& e) {
      return e.first == event && e.second.rfind(subject_prefix, 0) == 0;
    });
  }
  size_t Count(BusEvent event, const std::string& text) {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<size_t>(std::count_if(events_.begin(), events_.end(), [&](const auto& e) {
      return e.first == event && e.second == text;
    }));
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<BusEvent, std::string>> events_;
};

TEST_CASE("Bus connects as a user limited to its own inbox and gets JetStream answers",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = BusConnection::Connect(BusSettingsFor(*server));
  REQUIRE(bus.ok());
  CHECK((*bus)->connected());
  CHECK((*bus)->connected_url() == server->url());

  // The user may subscribe only _INBOX.mesh-reconciler.>: answers arrive only because the
  // connection uses that inbox prefix.
  ApiReply reply = (*bus)->Request({"$JS.API.INFO", ""});
  REQUIRE(reply.status.ok());
  CHECK(reply.payload.find("io.nats.jetstream.api.v1.account_info_response") != std::string::npos);
  CHECK((*bus)->requests_sent() == 1);
}

std::vector<ApiRequest> AlternatingRequests(int n) {
  std::vector<ApiRequest> requests;
  for (int i = 0; i < n; ++i) {
    // Alternate two request kinds so that an answer in the wrong slot would be visible.
    requests.push_back(i % 2 == 0 ? ApiRequest{"$JS.API.INFO", ""}
                                  : ApiRequest{"$JS.API.STREAM.INFO.NOPE" + std::to_string(i), ""});
  }
  return requests;
}

void CheckAlternatingReplies(const std::vector<ApiReply>& replies, int n) {
  REQUIRE(replies.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    INFO("reply " << i);
    REQUIRE(replies[i].status.ok());
    const char* expected = i % 2 == 0 ? "account_info_response" : "stream_info_response";
    CHECK(replies[i].payload.find(expected) != std::string::npos);
  }
}

TEST_CASE("RequestMany sends 300 JetStream requests 16 at a time, replies in order",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = BusConnection::Connect(BusSettingsFor(*server));
  REQUIRE(bus.ok());
  CheckAlternatingReplies((*bus)->RequestMany(AlternatingRequests(300)), 300);
  CHECK((*bus)->requests_sent() == 300);
}

TEST_CASE("RequestMany matches out-of-order replies and never exceeds max_in_flight",
          "[observers][integration][server]") {
  auto server = StartServer();
  Responder responder(*server);
  auto settings = BusSettingsFor(*server, "admin", "admin");
  settings.max_in_flight = 16;
  auto bus = BusConnection::Connect(settings);
  REQUIRE(bus.ok());
  std::vector<ApiRequest> requests;
  for (int i = 0; i < 300; ++i) requests.push_back({"echo." + std::to_string(i), ""});
  std::vector<ApiReply> replies = (*bus)->RequestMany(requests);
  REQUIRE(replies.size() == 300);
  for (int i = 0; i < 300; ++i) {
    REQUIRE(replies[i].status.ok());
    CHECK(replies[i].payload == std::to_string(i));
  }
  CHECK(responder.max_outstanding() <= 16);
  CHECK(responder.max_outstanding() >= Responder::kBatch);
}

TEST_CASE("RequestMany fails only the requests that get no answer",
          "[observers][integration][server]") {
  auto server = StartServer();
  Responder responder(*server);
  auto settings = BusSettingsFor(*server, "admin", "admin");
  settings.request_timeout = std::chrono::milliseconds(300);
  auto bus = BusConnection::Connect(settings);
  REQUIRE(bus.ok());
  std::vector<ApiRequest> requests = {{"echo.0", ""}, {"silent.1", ""}, {"echo.2", ""},
                                      {"echo.3", ""}, {"nobody.4", ""}, {"echo.5", ""}};
  // Only 4 echo requests: exactly one reversed batch.
  std::vector<ApiReply> replies = (*bus)->RequestMany(requests);
  REQUIRE(replies.size() == 6);
  CHECK(replies[0].payload == "0");
  CHECK(replies[1].status.code() == Errc::kTimeout);
  CHECK(replies[1].status.message().find("silent.1") != std::string::npos);
  CHECK(replies[2].payload == "2");
  CHECK(replies[3].payload == "3");
  CHECK(replies[4].status.code() == Errc::kTimeout);  // no responder at all
  CHECK(replies[5].payload == "5");
}

// cnats 3.4 (Debian 12's libnats) looks a message's subscription up in its read loop, lets go of
// the lock and then uses it without holding a reference (v3.4.1 conn.c natsConn_processMsg;
// fixed in v3.6.1, nats.c#637): a subscription destroyed meanwhile was freed under the read
// loop. Seen once in 1,600 runs of a pass test as "free(): invalid next size (fast)" when the
// Reconciler's connection was destroyed while API audits were still coming; AddressSanitizer
// calls it a heap-use-after-free. Here messages stream in on a subscription at the moment each
// is given up: duplicate answers to a batch's requests (a late answer to a request that timed
// out is one), and advisories to a connection being closed.
class Repeater {
 public:
  static constexpr int kCopies = 64;
  explicit Repeater(const NatsServer& server)
      : connection_(ConnectAdmin(server)), sub_(Subscribe(connection_, "again.*", OnRequest)) {
    REQUIRE(natsConnection_Flush(connection_.get()) == NATS_OK);
  }

 private:
  static void OnRequest(natsConnection* nc, natsSubscription*, natsMsg* msg, void*) {
    for (int i = 0; i < kCopies; ++i) {
      natsConnection_PublishString(nc, natsMsg_GetReply(msg), "again");
    }
    natsMsg_Destroy(msg);
  }
  ConnectionPtr connection_;
  SubscriptionPtr sub_;
};

TEST_CASE("A subscription is freed only once no message for it can still be read",
          "[observers][integration][server]") {
  auto server = StartServer();
  constexpr int kRounds = 300;

  SECTION("a batch's answers, each repeated: the batch's subscription is let go meanwhile") {
    Repeater repeater(*server);
    auto bus = BusConnection::Connect(BusSettingsFor(*server, "admin", "admin"));
    REQUIRE(bus.ok());
    for (int round = 0; round < kRounds; ++round) {
      std::vector<ApiReply> replies =
          (*bus)->RequestMany({{"again.1", ""}, {"again.2", ""}, {"again.3", ""}});
      for (const ApiReply& reply : replies) {
        REQUIRE(reply.status.ok());
        REQUIRE(reply.payload == "again");
      }
    }
  }

  SECTION("advisories streaming in: the connection is closed meanwhile") {
    ConnectionPtr publisher = ConnectAdmin(*server);
    std::atomic<bool> stop{false};
    std::thread flood([&] {
      while (!stop) {
        for (int i = 0; i < 100; ++i) {
          natsConnection_PublishString(publisher.get(), "$JS.EVENT.ADVISORY.STREAM.CREATED.FLOOD",
                                       "{}");
        }
        natsConnection_FlushTimeout(publisher.get(), 1000);
      }
    });
    struct Join {
      std::atomic<bool>& stop;
      std::thread& thread;
      ~Join() {
        stop = true;
        thread.join();
      }
    } join{stop, flood};
    for (int round = 0; round < kRounds; ++round) {
      std::atomic<int> seen{0};
      auto bus =
          BusConnection::Connect(BusSettingsFor(*server), [&](BusEvent event, const std::string&) {
            if (event == BusEvent::kAdvisory) ++seen;
          });
      REQUIRE(bus.ok());
      REQUIRE((*bus)->SubscribeAdvisories(DeletionAnswers::kForwarded).ok());
      REQUIRE(WaitFor([&] { return seen.load() > 0; }));
    }
  }
}

TEST_CASE("A wrong password is refused with the address and without the password",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto settings = BusSettingsFor(*server, testing::kReconcilerUser, "wrong-password-xyz");
  auto bus = BusConnection::Connect(settings);
  REQUIRE_FALSE(bus.ok());
  const std::string message = bus.status().ToString();
  INFO(message);
  CHECK(message.find("127.0.0.1:" + std::to_string(server->port())) != std::string::npos);
  CHECK(message.find("wrong-password-xyz") == std::string::npos);
  CHECK(message.find(testing::kReconcilerPassword) == std::string::npos);
  CHECK(bus.status().code() == Errc::kRefused);
  CHECK(message.find("Authorization Violation") != std::string::npos);
}

TEST_CASE("Credentials in a URL never reach an error message", "[observers][integration][server]") {
  BusSettings settings;
  const int closed_port = testing::FreePort();
  settings.urls = {"nats://bob:url-secret@127.0.0.1:" + std::to_string(closed_port)};
  settings.password = "pw-secret";
  settings.connect_timeout = std::chrono::milliseconds(500);
  auto bus = BusConnection::Connect(settings);
  REQUIRE_FALSE(bus.ok());
  const std::string message = bus.status().ToString();
  INFO(message);
  CHECK(message.find("nats://127.0.0.1:" + std::to_string(closed_port)) != std::string::npos);
  CHECK(message.find("url-secret") == std::string::npos);
  CHECK(message.find("bob") == std::string::npos);
  CHECK(message.find("pw-secret") == std::string::npos);
}

TEST_CASE("Advisories for streams reach the EventSink", "[observers][integration][server]") {
  auto server = StartServer();
  EventLog log;
  auto bus = BusConnection::Connect(BusSettingsFor(*server), log.Sink());
  REQUIRE(bus.ok());
  REQUIRE((*bus)->SubscribeAdvisories().ok());
  ApiReply reply = (*bus)->Request(
      {"$JS.API.STREAM.CREATE.ADV", R"({"name":"ADV","subjects":["adv.>"],"storage":"memory"})"});
  REQUIRE(reply.status.ok());
  CHECK(reply.payload.find("\"error\"") == std::string::npos);
  CHECK(WaitFor(
      [&] { return log.Has(BusEvent::kAdvisory, "$JS.EVENT.ADVISORY.STREAM.CREATED.ADV"); }));
}

// The recreation wait's signal on 2.9 (DeletionAnswerMarksStoreRemoved): the server's answer
// to a stream's deletion, whoever asked, read from the API audit advisories.
TEST_CASE("Successful stream deletions reach the EventSink when asked for, failed ones never",
          "[observers][integration][server]") {
  auto server = StartServer();
  EventLog forwarded;
  auto bus = BusConnection::Connect(BusSettingsFor(*server), forwarded.Sink());
  REQUIRE(bus.ok());
  REQUIRE((*bus)->SubscribeAdvisories(DeletionAnswers::kForwarded).ok());
  EventLog plain;
  auto other = BusConnection::Connect(BusSettingsFor(*server), plain.Sink());
  REQUIRE(other.ok());
  REQUIRE((*other)->SubscribeAdvisories().ok());
  for (const char* name : {"ADV", "ADV2"}) {
    ApiReply created = (*bus)->Request(
        {std::string("$JS.API.STREAM.CREATE.") + name,
         std::string(R"({"name":")") + name + R"(","subjects":[")" + name + R"(.>"]})"});
    REQUIRE(created.status.ok());
    REQUIRE(created.payload.find("\"error\"") == std::string::npos);
  }
  // Deleted, then deleted again (an error answer: the stream is gone), then the second stream
  // deleted: its answer comes after the error's on the one audit subscription.
  for (const char* name : {"ADV", "ADV", "ADV2"}) {
    REQUIRE((*other)->Request({std::string("$JS.API.STREAM.DELETE.") + name, ""}).status.ok());
  }
  REQUIRE(WaitFor([&] { return forwarded.Count(BusEvent::kStreamDeletionAnswered, "ADV2") == 1; }));
  CHECK(forwarded.Count(BusEvent::kStreamDeletionAnswered, "ADV") == 1);
  // The other connection did not ask: no answers, its advisories as before.
  REQUIRE(WaitFor(
      [&] { return plain.Has(BusEvent::kAdvisory, "$JS.EVENT.ADVISORY.STREAM.DELETED.ADV2"); }));
  CHECK_FALSE(plain.Has(BusEvent::kStreamDeletionAnswered));
}

TEST_CASE("The connection reports a restart and keeps working after it",
          "[observers][integration][server]") {
  auto server = StartServer();
  EventLog log;
  auto bus = BusConnection::Connect(BusSettingsFor(*server), log.Sink());
  REQUIRE(bus.ok());
  server->Restart();
  CHECK(WaitFor([&] { return log.Has(BusEvent::kDisconnected); }));
  CHECK(WaitFor([&] { return log.Has(BusEvent::kReconnected, server->url()); }));
  REQUIRE(WaitFor([&] { return (*bus)->connected(); }));
  CHECK((*bus)->Request({"$JS.API.INFO", ""}).status.ok());
}

// The server's client connections named `name_prefix`..., and the messages each sent to the
// server (/connz in_msgs).
std::vector<int64_t> ConnectionsNamed(const NatsServer& server, const std::string& name_prefix) {
  auto connz = HttpGet(server.monitor_url() + "/connz", std::chrono::seconds(2));
  REQUIRE(connz.ok());
  rapidjson::Document doc;
  doc.Parse(connz->body.c_str());
  REQUIRE(doc.IsObject());
  std::vector<int64_t> in_msgs;
  for (const auto& c : doc["connections"].GetArray()) {
    if (c.HasMember("name") && std::string(c["name"].GetString()).rfind(name_prefix, 0) == 0) {
      in_msgs.push_back(c["in_msgs"].GetInt64());
    }
  }
  return in_msgs;
}

TEST_CASE(
    "A spread batch goes over lanes where the server handles a connection's requests in "
    "place, replies in order",
    "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = BusConnection::Connect(BusSettingsFor(*server));
  REQUIRE(bus.ok());
  const bool in_place =
      HandlesApiRequestsInPlace(ParseServerVersion(testing::ServerBinaryVersion()));
  constexpr int kRequests = 300;

  // Batches on one connection never open a lane.
  CheckAlternatingReplies((*bus)->RequestMany(AlternatingRequests(kRequests)), kRequests);
  CHECK((*bus)->lanes_open() == 0);
  CHECK(ConnectionsNamed(*server, testing::kReconcilerUser).size() == 1);

  // The first spread batch starts opening the lanes and goes on the main connection alone; a
  // later one, once they are open, goes over all four. Each batch's replies are in order.
  int64_t sent = 0;
  auto spread_batch = [&] {
    CheckAlternatingReplies((*bus)->RequestMany(AlternatingRequests(kRequests), Spread::kLanes),
                            kRequests);
    sent += kRequests;
    return (*bus)->lanes_open() == 3;
  };
  if (!in_place) {
    // From 2.11.10 on the server spreads one connection's requests itself: no lanes.
    for (int i = 0; i < 3; ++i) CHECK_FALSE(spread_batch());
    CHECK(ConnectionsNamed(*server, testing::kReconcilerUser).size() == 1);
    return;
  }
  REQUIRE(WaitFor(spread_batch));
  CHECK(spread_batch());
  CHECK((*bus)->requests_sent() == kRequests + sent);
  // The main connection and three lanes, named after the user; every lane carried requests.
  CHECK(ConnectionsNamed(*server, testing::kReconcilerUser).size() == 4);
  const std::vector<int64_t> lanes =
      ConnectionsNamed(*server, std::string(testing::kReconcilerUser) + " lane ");
  REQUIRE(lanes.size() == 3);
  for (int64_t in_msgs : lanes) CHECK(in_msgs > 0);
}

TEST_CASE("Lanes the server refuses are counted with the error, and every batch is answered",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  options.extra_config = "max_connections: 1";  // the main connection alone
  auto server = NatsServer::Start(options);
  const BusSettings settings = BusSettingsFor(*server);
  auto bus = BusConnection::Connect(settings);
  REQUIRE(bus.ok());
  if (!HandlesApiRequestsInPlace(ParseServerVersion(testing::ServerBinaryVersion()))) {
    SUCCEED("2.11.10 on: no lanes to open");
    return;
  }
  CHECK((*bus)->lane_failures().count == 0);
  // The first spread batch starts opening three lanes in the background; it and those after it
  // go on the main connection, whole and in order, while the server refuses each lane.
  constexpr int kRequests = 300;
  auto spread_batch = [&] {
    CheckAlternatingReplies((*bus)->RequestMany(AlternatingRequests(kRequests), Spread::kLanes),
                            kRequests);
  };
  REQUIRE(WaitFor([&] {
    spread_batch();
    return (*bus)->lane_failures().count == 3;
  }));
  const BusConnection::LaneFailures failures = (*bus)->lane_failures();
  INFO(failures.last_error);
  CHECK(failures.last_error.find("open lane ") != std::string::npos);
  CHECK(failures.last_error.find(server->url()) != std::string::npos);
  // Not the server's own "maximum connections exceeded": cnats may see the socket close first.
  CHECK(failures.last_error.find(settings.password) == std::string::npos);
  CHECK((*bus)->lanes_open() == 0);
  // No new attempt within the minute after one that opened none.
  for (int i = 0; i < 3; ++i) spread_batch();
  CHECK((*bus)->lane_failures().count == 3);
  CHECK((*bus)->lanes_open() == 0);
}

TEST_CASE("A server stopped during a spread batch fails what is left at once, on every lane",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto settings = BusSettingsFor(*server);
  settings.request_timeout = std::chrono::seconds(20);  // far longer than the test waits
  auto bus = BusConnection::Connect(settings);
  REQUIRE(bus.ok());
  if (!HandlesApiRequestsInPlace(ParseServerVersion(testing::ServerBinaryVersion()))) {
    SUCCEED("2.11.10 on: no lanes to lose");
    return;
  }
  REQUIRE(WaitFor([&] {
    (*bus)->RequestMany(AlternatingRequests(64), Spread::kLanes);
    return (*bus)->lanes_open() == 3;
  }));
  constexpr int kRequests = 200000;
  const int64_t before = (*bus)->requests_sent();
  const auto start = std::chrono::steady_clock::now();
  auto batch = std::async(std::launch::async, [&] {
    return (*bus)->RequestMany(AlternatingRequests(kRequests), Spread::kLanes);
  });
  REQUIRE(WaitFor([&] { return (*bus)->requests_sent() - before > 1000; }));
  server->Kill();
  const std::vector<ApiReply> replies = batch.get();
  // Every connection noticed within its connection check, not at the 20 s request timeout.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  REQUIRE(replies.size() == static_cast<size_t>(kRequests));
  int answered = 0;
  int failed = 0;
  for (const ApiReply& reply : replies) {
    if (reply.status.ok()) {
      ++answered;
    } else {
      CHECK(reply.status.code() == Errc::kUnavailable);
      ++failed;
    }
  }
  CHECK(answered > 0);
  CHECK(failed > 0);

  // The lost lanes never reconnect; once the main connection is back, a later spread batch
  // drops them and opens new ones, and the batch is answered whole meanwhile.
  server->Restart();
  REQUIRE(WaitFor([&] { return (*bus)->connected(); }));
  CHECK((*bus)->lanes_open() == 0);
  CHECK(WaitFor([&] {
    CheckAlternatingReplies((*bus)->RequestMany(AlternatingRequests(64), Spread::kLanes), 64);
    return (*bus)->lanes_open() == 3;
  }));
  CHECK(ConnectionsNamed(*server, std::string(testing::kReconcilerUser) + " lane ").size() == 3);
}

}  // namespace
}  // namespace mesh::observers

namespace mesh::observers {
namespace {

TEST_CASE("An idle connection to a frozen server is called lost within the request timeout",
          "[observers][integration][server]") {
  auto server = StartServer();
  struct Thaw {  // whatever happens below, the server must not stay frozen
    NatsServer& server;
    ~Thaw() { server.Thaw(); }
  } thaw{*server};
  auto settings = BusSettingsFor(*server);
  settings.request_timeout = std::chrono::milliseconds(1500);
  std::vector<BusEvent> events;
  std::mutex events_mutex;
  auto bus = BusConnection::Connect(settings, [&](BusEvent event, const std::string&) {
    std::lock_guard<std::mutex> lock(events_mutex);
    events.push_back(event);
  });
  REQUIRE(bus.ok());
  REQUIRE((*bus)->connected());
  server->Freeze();
  const auto frozen_at = std::chrono::steady_clock::now();
  // No request: only cnats' PINGs can tell.
  const bool lost = WaitFor([&] { return !(*bus)->connected(); }, std::chrono::seconds(30));
  const auto took = std::chrono::steady_clock::now() - frozen_at;
  INFO("lost after " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms; request timeout " << settings.request_timeout.count() << " ms");
  REQUIRE(lost);
  // Within the timeout, plus what a loaded 2-core machine adds to a timer (not an interval).
  CHECK(took <= settings.request_timeout + std::chrono::milliseconds(750));
  CHECK(WaitFor([&] {
    std::lock_guard<std::mutex> lock(events_mutex);
    return std::find(events.begin(), events.end(), BusEvent::kDisconnected) != events.end();
  }));
  server->Thaw();
  CHECK(WaitFor([&] { return (*bus)->connected(); }, std::chrono::seconds(30)));
  CHECK((*bus)->Request({"$JS.API.INFO", ""}).status.ok());
}

}  // namespace
}  // namespace mesh::observers
