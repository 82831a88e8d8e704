// The rendered users file, loaded by a real nats-server, enforces the contract's permissions
// (mesh-conventions.md section 4): messages flow through the reconciler's streams and consumers
// for each kind of principal, and what the contract does not allow is refused by the server.
#include <nats/nats.h>
#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/users_file.h"
#include "reconciler/cli/settings.h"
#include "reconciler/pass/pass.h"
#include "tests/model/fixtures.h"
#include "tests/support/nats_client.h"
#include "tests/support/nats_server.h"

namespace mesh::model {
namespace {

using mesh::testing::WaitFor;

// Whether a client uses the inbox prefix its permissions allow ("_INBOX.<user>") or cnats'
// default ("_INBOX.").
enum class InboxPrefix { kOwn, kDefault };

// The server's asynchronous errors on one connection (cnats' callback thread writes, the test
// thread reads).
class ErrorLog {
 public:
  void Add(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    texts_.push_back(std::move(text));
  }
  // True when some error's text contains `fragment`.
  bool Contains(const std::string& fragment) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& t : texts_) {
      if (t.find(fragment) != std::string::npos) return true;
    }
    return false;
  }
  bool empty() const {
    std::lock_guard<std::mutex> lock(mu_);
    return texts_.empty();
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> texts_;
};

void OnAsyncError(natsConnection* nc, natsSubscription*, natsStatus status, void* closure) {
  const char* text = nullptr;
  natsConnection_GetLastError(nc, &text);
  static_cast<ErrorLog*>(closure)->Add(std::string(natsStatus_GetText(status)) + ": " +
                                       (text != nullptr ? text : ""));
}

using SubscriptionPtr = std::unique_ptr<natsSubscription, void (*)(natsSubscription*)>;
using MessagePtr = std::unique_ptr<natsMsg, void (*)(natsMsg*)>;

// One principal's connection with its error log. Not copyable (the log's address is the
// callback's closure); the connection is destroyed before the log.
class Client {
 public:
  Client(const std::string& url, const std::string& user, const std::string& password,
         InboxPrefix prefix = InboxPrefix::kOwn)
      : log_(std::make_unique<ErrorLog>()) {
    mesh::testing::NatsClientOptions options;
    options.own_inbox_prefix = prefix == InboxPrefix::kOwn;
    options.error_handler = OnAsyncError;
    options.error_closure = log_.get();
    natsStatus status = NATS_OK;
    conn_ = mesh::testing::ConnectNats(url, user, password, options, status);
    const std::string error =
        nats_GetLastError(nullptr) != nullptr ? nats_GetLastError(nullptr) : "";
    INFO(user << ": " << error);
    REQUIRE(status == NATS_OK);
  }

  natsConnection* get() const { return conn_.get(); }
  const ErrorLog& errors() const { return *log_; }

  SubscriptionPtr Subscribe(const std::string& subject, const std::string& queue = "") {
    natsSubscription* raw = nullptr;
    const natsStatus s =
        queue.empty()
            ? natsConnection_SubscribeSync(&raw, conn_.get(), subject.c_str())
            : natsConnection_QueueSubscribeSync(&raw, conn_.get(), subject.c_str(), queue.c_str());
    SubscriptionPtr sub(raw, natsSubscription_Destroy);
    REQUIRE(s == NATS_OK);
    REQUIRE(natsConnection_Flush(conn_.get()) == NATS_OK);  // the interest reached the server
    return sub;
  }

  void Publish(const std::string& subject, const std::string& body) {
    REQUIRE(natsConnection_PublishString(conn_.get(), subject.c_str(), body.c_str()) == NATS_OK);
    REQUIRE(natsConnection_Flush(conn_.get()) == NATS_OK);
  }

 private:
  std::unique_ptr<ErrorLog> log_;
  mesh::testing::NatsConnectionPtr conn_;
};

// The next message on `sub`, waiting for it; null when none came.
MessagePtr Receive(natsSubscription* sub) {
  natsMsg* raw = nullptr;
  WaitFor([&] { return natsSubscription_NextMsg(&raw, sub, 50) == NATS_OK; });
  return MessagePtr(raw, natsMsg_Destroy);
}

// Receives one message on `sub`, checks its body, and acks it on `client`'s connection.
void ReceiveAndAck(Client& client, natsSubscription* sub, const std::string& body,
                   const std::string& ack_prefix) {
  MessagePtr msg = Receive(sub);
  REQUIRE(msg != nullptr);
  CHECK(std::string(natsMsg_GetData(msg.get()), natsMsg_GetDataLength(msg.get())) == body);
  const std::string reply =
      natsMsg_GetReply(msg.get()) != nullptr ? natsMsg_GetReply(msg.get()) : "";
  INFO("reply " << reply);
  REQUIRE(reply.rfind(ack_prefix, 0) == 0);
  client.Publish(reply, "+ACK");
}

// The consumer's (delivered stream sequence, ack pending) via the JetStream API.
struct ConsumerCounts {
  int64_t delivered = -1;
  int64_t ack_pending = -1;
};

ConsumerCounts CountsOf(natsConnection* reconciler, const std::string& stream,
                        const std::string& durable) {
  const std::string subject = "$JS.API.CONSUMER.INFO." + stream + "." + durable;
  natsMsg* raw = nullptr;
  const natsStatus s = natsConnection_RequestString(&raw, reconciler, subject.c_str(), "", 2000);
  MessagePtr reply(raw, natsMsg_Destroy);
  ConsumerCounts counts;
  if (s != NATS_OK) return counts;
  rapidjson::Document doc;
  doc.Parse(natsMsg_GetData(reply.get()), natsMsg_GetDataLength(reply.get()));
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("num_ack_pending")) return counts;
  counts.ack_pending = doc["num_ack_pending"].GetInt64();
  counts.delivered = doc["delivered"]["stream_seq"].GetInt64();
  return counts;
}

// Waits until the consumer delivered at least one message and none awaits an ack.
bool AckAccepted(natsConnection* reconciler, const std::string& stream,
                 const std::string& durable) {
  return WaitFor([&] {
    const ConsumerCounts c = CountsOf(reconciler, stream, durable);
    return c.delivered >= 1 && c.ack_pending == 0;
  });
}

constexpr char kViolation[] = "Permissions Violation";

// A server loaded with the rendered example, and the streams and consumers the reconciler
// created over its own connection.
struct LiveMesh {
  LiveMesh() {
    const DesiredState desired = test::DeriveExample();
    BcryptHasher hasher(test::kReconcilerPassword, test::kCheapCost);
    Result<HashedCredentials> hashes = hasher.HashAll(desired);
    REQUIRE(hashes.ok());
    Result<RenderedUsersFile> rendered = RenderUsersFile(desired, *hashes);
    REQUIRE(rendered.ok());
    mesh::testing::NatsServerOptions options;
    options.users_conf = rendered->bytes;
    server = mesh::testing::NatsServer::Start(options);

    reconciler::Settings settings;
    settings.records_path = test::ExamplePath();
    settings.bus.urls = {server->url()};
    settings.bus.password = test::kReconcilerPassword;
    settings.monitor_url = server->monitor_url();
    reconciler::Reconciler pass(settings);
    const reconciler::PassReport report =
        pass.RunPass(1, reconciler::Trigger::kOnce, ApplyMode::kApply);
    INFO(reconciler::FormatReportTable(report));
    REQUIRE(report.status.ok());
    REQUIRE_FALSE(report.any_action_failed());

    reconciler_conn =
        mesh::testing::ConnectNats({server->url()}, "mesh-reconciler", test::kReconcilerPassword);
  }
  std::unique_ptr<mesh::testing::NatsServer> server;
  mesh::testing::NatsConnectionPtr reconciler_conn;
};

TEST_CASE("a live server enforces the rendered permissions",
          "[render][nats][permissions][server]") {
  LiveMesh mesh;
  const std::string url = mesh.server->url();
  Client controller(url, "mesh-controller", "demo-only-controller-password");
  Client node_a(url, "node-a", "demo-only-node-a-password");
  Client billing(url, "billing", "demo-only-billing-password");
  Client shop(url, "shop", "demo-only-shop-password");

  SECTION("a node receives its declarations from the controller and acks them") {
    SubscriptionPtr decl = node_a.Subscribe("mesh.in.node-a.decl");
    controller.Publish("mesh.decl.node-a", "declare");
    ReceiveAndAck(node_a, decl.get(), "declare", "$JS.ACK.DECL.decl_node-a.");
    CHECK(AckAccepted(mesh.reconciler_conn.get(), "DECL", "decl_node-a"));
    CHECK(controller.errors().empty());
    CHECK(node_a.errors().empty());
  }

  SECTION("a seat's module works what a user of the seat submits") {
    SubscriptionPtr work = billing.Subscribe("mesh.q.invoicer", "invoicer");
    shop.Publish("mesh.work.invoicer.render", "invoice #1");  // intake uses invoicer
    ReceiveAndAck(billing, work.get(), "invoice #1", "$JS.ACK.SEAT_invoicer.worker.");
    CHECK(AckAccepted(mesh.reconciler_conn.get(), "SEAT_invoicer", "worker"));
    CHECK(shop.errors().empty());
    CHECK(billing.errors().empty());
  }

  SECTION("a follower receives a seat's event and acks it") {
    SubscriptionPtr events = shop.Subscribe("mesh.in.shop.ev.invoicer.invoiced");
    billing.Publish("mesh.evt.invoicer.invoiced", "invoiced #1");
    ReceiveAndAck(shop, events.get(), "invoiced #1", "$JS.ACK.EVENTS.ev_shop_invoicer_invoiced.");
    CHECK(AckAccepted(mesh.reconciler_conn.get(), "EVENTS", "ev_shop_invoicer_invoiced"));
    CHECK(billing.errors().empty());
    CHECK(shop.errors().empty());
  }

  SECTION("a node may not declare for another node") {
    node_a.Publish("mesh.decl.node-b", "forged");
    CHECK(WaitFor([&] { return node_a.errors().Contains(kViolation); }));
  }

  SECTION("a module may not read another principal's deliveries") {
    SubscriptionPtr stolen = billing.Subscribe("mesh.in.shop.>");
    CHECK(WaitFor([&] { return billing.errors().Contains(kViolation); }));
  }

  SECTION("a client without its own inbox prefix gets no answers") {
    Client careless(url, "billing", "demo-only-billing-password", InboxPrefix::kDefault);
    natsInbox* raw_inbox = nullptr;
    REQUIRE(natsInbox_Create(&raw_inbox) == NATS_OK);
    std::unique_ptr<natsInbox, void (*)(natsInbox*)> inbox(raw_inbox, natsInbox_Destroy);
    REQUIRE(std::string(inbox.get()).rfind("_INBOX.billing", 0) != 0);
    SubscriptionPtr answers = careless.Subscribe(inbox.get());
    CHECK(WaitFor([&] { return careless.errors().Contains(kViolation); }));
  }
}

}  // namespace
}  // namespace mesh::model
