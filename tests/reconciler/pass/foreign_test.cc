// What the mesh does not own, on a real nats-server (the suite's: $MESH_NATS_SERVER or
// Debian's 2.9.10): foreign streams and KV buckets never block or cost a pass, updates keep
// the fields an operator set by hand, and a consumer create never overwrites what another
// writer made (2.10+; 2.9's legacy create is kept, pitfall and all).
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <catch2/catch.hpp>

#include "observers/jetstream.h"
#include "observers/server_version.h"
#include "reconciler/apply/apply.h"
#include "reconciler/pass/pass.h"
#include "tests/support/operator.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using test::LiveMesh;

using mesh::testing::Operator;

std::string Json(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  value.Accept(writer);
  return buffer.GetString();
}

struct Fresh {
  LiveMesh mesh{test::ExampleRecordsJson()};
  Reconciler reconciler{mesh.PassSettings()};
  uint64_t next_pass = 1;

  PassReport Pass() { return reconciler.RunPass(next_pass++, Trigger::kForced, ApplyMode::kApply); }
  void Converge() {
    PassReport report = Pass();
    INFO(FormatReportTable(report));
    REQUIRE(report.status.ok());
    REQUIRE(report.converged());
  }
};

const DriftEntry* Find(const std::vector<DriftEntry>& drift, const std::string& name) {
  for (const auto& e : drift) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

TEST_CASE("a KV bucket and foreign streams with consumers: never listed, never blocking",
          "[pass][integration][server]") {
  Fresh f;
  f.Converge();
  Operator op(f.mesh.PassSettings().bus);
  op.Call("STREAM.CREATE.KV_config",
          R"({"name":"KV_config","subjects":["$KV.config.>"],"max_msgs_per_subject":5,)"
          R"("allow_rollup_hdrs":true,"deny_delete":true,"allow_direct":true,"discard":"new",)"
          R"("storage":"file","num_replicas":1,"max_age":0})");
  op.Call("STREAM.CREATE.ORDERS", R"({"name":"ORDERS","subjects":["orders.>"]})");
  op.Call(
      "CONSUMER.DURABLE.CREATE.ORDERS.shipper",
      R"({"stream_name":"ORDERS","config":{"durable_name":"shipper","ack_policy":"explicit"}})");
  op.Call("CONSUMER.CREATE.ORDERS",  // an ephemeral, as the nats CLI makes them
          R"({"stream_name":"ORDERS","config":{"deliver_subject":"_INBOX.x","ack_policy":"none",)"
          R"("inactive_threshold":60000000000}})");
  op.Call(
      "CONSUMER.CREATE.KV_config",  // a KV watcher
      R"({"stream_name":"KV_config","config":{"deliver_subject":"_INBOX.y",)"
      R"("ack_policy":"none","deliver_policy":"last_per_subject","filter_subject":"$KV.config.>",)"
      R"("inactive_threshold":60000000000}})");
  op.Call("CONSUMER.DELETE.DECL.decl_node-a");

  PassReport report = f.Pass();
  INFO(FormatReportTable(report));
  REQUIRE(report.status.ok());
  CHECK(report.plan.drift.size() == 1);  // DECL/decl_node-a only
  CHECK(Find(report.plan.drift, "DECL/decl_node-a"));
  CHECK(report.converged());

  // The reconciler's own view: every stream, consumers only on the mesh's streams.
  model::DesiredState desired = test::DesiredFrom(test::ExampleRecordsJson());
  auto observed = observers::ObserveJetStream(
      *op.bus, observers::ObserveScope{model::OwnershipMark(desired.mesh)});
  REQUIRE(observed.ok());
  CHECK(observed->streams.size() == desired.streams.size() + 2);
  for (const auto& c : observed->consumers) {
    INFO(c.config.stream.str() << "/" << c.config.durable.str());
    CHECK(c.config.stream.str() != "ORDERS");
    CHECK(c.config.stream.str() != "KV_config");
  }
  CHECK(observed->consumers.size() == desired.consumers.size());
  // One stream list page, one consumer list per mesh stream.
  CHECK(observed->api_requests == 1 + static_cast<int>(desired.streams.size()));
  // Nothing foreign was touched.
  CHECK(op.Config("STREAM.INFO.KV_config")["max_msgs_per_subject"].GetInt64() == 5);
  CHECK(op.Call("CONSUMER.INFO.ORDERS.shipper").HasMember("config"));
}

TEST_CASE("a repair keeps the fields an operator set by hand", "[pass][integration][server]") {
  Fresh f;
  f.Converge();
  Operator op(f.mesh.PassSettings().bus);
  const bool v210 = op.AtLeast210();

  // EVENTS: hand-set fields the mesh does not own, and drift on one it owns (max_age).
  rapidjson::Document stream = op.Config("STREAM.INFO.EVENTS");
  auto& sa = stream.GetAllocator();
  stream["max_msgs_per_subject"].SetInt64(100);
  stream["allow_direct"].SetBool(true);
  stream["max_age"].SetInt64(3600 * model::kNanosPerSecond);
  if (v210) {  // 2.10 added compression and metadata
    stream.RemoveMember("compression");
    stream.AddMember("compression", "s2", sa);
    rapidjson::Value metadata(rapidjson::kObjectType);
    metadata.AddMember("owner", "ops", sa);
    stream.RemoveMember("metadata");
    stream.AddMember("metadata", metadata, sa);
  }
  op.Call("STREAM.UPDATE.EVENTS", Json(stream));

  // DECL/decl_node-a: hand-set max_ack_pending and inactive_threshold, drift on max_deliver.
  rapidjson::Document consumer = op.Config("CONSUMER.INFO.DECL.decl_node-a");
  auto& ca = consumer.GetAllocator();
  consumer.RemoveMember("max_ack_pending");
  consumer.AddMember("max_ack_pending", 7, ca);
  consumer.RemoveMember("inactive_threshold");
  consumer.AddMember("inactive_threshold", int64_t{86400} * model::kNanosPerSecond, ca);
  consumer["max_deliver"].SetInt64(3);
  if (v210) {
    rapidjson::Value metadata(rapidjson::kObjectType);
    metadata.AddMember("owner", "ops", ca);
    consumer.RemoveMember("metadata");
    consumer.AddMember("metadata", metadata, ca);
  }
  rapidjson::Document request(rapidjson::kObjectType);
  request.AddMember("stream_name", "DECL", request.GetAllocator());
  request.AddMember("config", rapidjson::Value(consumer, request.GetAllocator()),
                    request.GetAllocator());
  op.Call("CONSUMER.DURABLE.CREATE.DECL.decl_node-a", Json(request));

  PassReport report = f.Pass();
  INFO(FormatReportTable(report));
  REQUIRE(report.status.ok());
  REQUIRE(Find(report.plan.drift, "EVENTS"));
  CHECK(Find(report.plan.drift, "EVENTS")->remedy == Remedy::kUpdateInPlace);
  REQUIRE(Find(report.plan.drift, "DECL/decl_node-a"));
  CHECK(report.plan.drift.size() == 2);
  CHECK(report.converged());

  // The owned fields are repaired...
  rapidjson::Document s = op.Config("STREAM.INFO.EVENTS");
  CHECK(s["max_age"].GetInt64() == 604800 * model::kNanosPerSecond);
  rapidjson::Document c = op.Config("CONSUMER.INFO.DECL.decl_node-a");
  CHECK(c["max_deliver"].GetInt64() == -1);
  // ...and the hand-set ones are still there.
  CHECK(s["max_msgs_per_subject"].GetInt64() == 100);
  CHECK(s["allow_direct"].GetBool());
  CHECK(c["max_ack_pending"].GetInt64() == 7);
  CHECK(c["inactive_threshold"].GetInt64() == int64_t{86400} * model::kNanosPerSecond);
  if (v210) {
    CHECK(std::string(s["compression"].GetString()) == "s2");
    CHECK(std::string(s["metadata"]["owner"].GetString()) == "ops");
    CHECK(std::string(c["metadata"]["owner"].GetString()) == "ops");
  }
  // And a further pass finds nothing to do: _nats.* metadata a newer server adds is ignored.
  PassReport again = f.Pass();
  INFO(FormatReportTable(again));
  CHECK(again.plan.drift.empty());
}

TEST_CASE("a consumer create never overwrites another writer's consumer on 2.10+",
          "[apply][integration][server]") {
  LiveMesh mesh(test::ExampleRecordsJson());
  Operator op(mesh.PassSettings().bus);
  const bool v210 = op.AtLeast210();
  // The version the bus reports is the one the test started.
  const std::string log = mesh::testing::ReadFile(mesh.server->log_file());
  CHECK(log.find("Version:  " + op.bus->server_version()->ToString()) != std::string::npos);

  op.Call("STREAM.CREATE.WORK", R"({"name":"WORK","subjects":["work.>"]})");
  // Another writer made "taken" meanwhile, with another configuration.
  op.Call("CONSUMER.DURABLE.CREATE.WORK.taken",
          R"({"stream_name":"WORK","config":{"durable_name":"taken","ack_policy":"explicit",)"
          R"("deliver_subject":"other.taken","max_deliver":3}})");

  model::ConsumerSpec taken;
  taken.stream = StreamName("WORK");
  taken.durable = ConsumerName("taken");
  taken.deliver_subject = "mesh.in.x.taken";
  taken.max_deliver = 10;
  model::ConsumerSpec absent = taken;
  absent.durable = ConsumerName("absent");
  Action create;
  create.kind = ActionKind::kCreateConsumer;
  create.name = "WORK/taken";
  create.consumer = taken;
  Action update;
  update.kind = ActionKind::kUpdateConsumer;
  update.name = "WORK/absent";
  update.consumer = absent;

  ApplyTargets targets;
  targets.bus = op.bus.get();
  std::vector<ActionOutcome> outcomes = Apply({create, update}, targets);
  REQUIRE(outcomes.size() == 2);
  rapidjson::Document after = op.Config("CONSUMER.INFO.WORK.taken");
  observers::ApiReply absent_info = op.bus->Request({"$JS.API.CONSUMER.INFO.WORK.absent", ""});
  const bool absent_exists = !observers::ParseApiError(absent_info.payload).has_value();
  if (v210) {
    CHECK(outcomes[0].outcome == Outcome::kRefused);
    CHECK(outcomes[0].err_code == 10148);  // JSConsumerAlreadyExists
    CHECK(after["max_deliver"].GetInt64() == 3);
    CHECK(std::string(after["deliver_subject"].GetString()) == "other.taken");
    CHECK(outcomes[1].outcome == Outcome::kRefused);
    CHECK(outcomes[1].err_code == 10149);  // JSConsumerDoesNotExist
    CHECK_FALSE(absent_exists);
  } else {
    // 2.9: the legacy durable create is all there is; it overwrites (docs/conventions.md 7).
    CHECK(outcomes[0].outcome == Outcome::kDone);
    CHECK(after["max_deliver"].GetInt64() == 10);
    CHECK(outcomes[1].outcome == Outcome::kDone);
    CHECK(absent_exists);
  }
}

}  // namespace
}  // namespace mesh::reconciler
