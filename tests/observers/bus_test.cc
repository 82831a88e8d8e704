// BusConnection against a real nats-server: credentials, the custom inbox prefix, pipelined
// requests, timeouts, advisories and reconnects.
#include "observers/bus.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>

#include "observers/c_handle.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

using testing::BusSettingsFor;
using testing::NatsServer;
using testing::WaitFor;

using ConnectionPtr = CHandle<natsConnection, natsConnection_Destroy>;
using SubscriptionPtr = CHandle<natsSubscription, natsSubscription_Destroy>;

// An unrestricted client ("admin") that answers "echo.<n>" with "<n>", holding requests back and
// answering each batch of kBatch in reverse order so that replies arrive out of order. It also
// subscribes "silent.>" and never answers.
class Responder {
 public:
  static constexpr int kBatch = 4;

  explicit Responder(const NatsServer& server) {
    natsConnection* raw = nullptr;
    REQUIRE(natsConnection_ConnectTo(
                &raw, ("nats://admin:admin@127.0.0.1:" + std::to_string(server.port())).c_str()) ==
            NATS_OK);
    connection_.reset(raw);
    natsSubscription* sub = nullptr;
    REQUIRE(natsConnection_Subscribe(&sub, raw, "echo.*", OnEcho, this) == NATS_OK);
    echo_.reset(sub);
    REQUIRE(natsConnection_SubscribeSync(&sub, raw, "silent.>") == NATS_OK);
    silent_.reset(sub);
    REQUIRE(natsConnection_Flush(raw) == NATS_OK);
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

TEST_CASE("RequestMany sends 300 JetStream requests 16 at a time, replies in order",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = BusConnection::Connect(BusSettingsFor(*server));
  REQUIRE(bus.ok());
  std::vector<ApiRequest> requests;
  for (int i = 0; i < 300; ++i) {
    // Alternate two request kinds so that an answer in the wrong slot would be visible.
    requests.push_back(i % 2 == 0 ? ApiRequest{"$JS.API.INFO", ""}
                                  : ApiRequest{"$JS.API.STREAM.INFO.NOPE" + std::to_string(i), ""});
  }
  std::vector<ApiReply> replies = (*bus)->RequestMany(requests);
  REQUIRE(replies.size() == 300);
  for (int i = 0; i < 300; ++i) {
    INFO("reply " << i);
    REQUIRE(replies[i].status.ok());
    const char* expected = i % 2 == 0 ? "account_info_response" : "stream_info_response";
    CHECK(replies[i].payload.find(expected) != std::string::npos);
  }
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

}  // namespace
}  // namespace mesh::observers
