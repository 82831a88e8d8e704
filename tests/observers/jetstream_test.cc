// The JetStream observer and codec: decoding what nats-server 2.9 answers, encoding what apply
// sends, paging through large accounts, and the round trip that keeps created objects from ever
// being reported as drifted.
#include "observers/jetstream.h"

#include <rapidjson/document.h>

#include <catch2/catch.hpp>

#include "model/desired.h"
#include "model/records.h"
#include "observers/monitor.h"
#include "reconciler/apply/encode.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_cluster.h"
#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

// The request encoders are apply's (reconciler/apply/encode.h); these tests read back what
// they write.
using reconciler::ConsumerRequest;
using reconciler::EncodeConsumerCreate;
using reconciler::EncodeConsumerUpdate;
using reconciler::EncodeStreamConfig;
using reconciler::EncodeStreamUpdate;

using model::AckPolicy;
using model::ConsumerSpec;
using model::DeliverPolicy;
using model::Discard;
using model::ReplayPolicy;
using model::Retention;
using model::Storage;
using model::StreamSpec;
using testing::NatsServer;

// Answers captured from nats-server 2.9.10.
constexpr const char* kServerStreamConfig =
    R"({"name":"A","subjects":["b.\u003e","a.\u003e"],"retention":"workqueue","max_consumers":-1,)"
    R"("max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,)"
    R"("discard":"old","storage":"file","num_replicas":1,"duplicate_window":120000000000,)"
    R"("allow_direct":false,"mirror_direct":false,"sealed":false,"deny_delete":false,)"
    R"("deny_purge":false,"allow_rollup_hdrs":false})";
constexpr const char* kServerConsumerConfigAckNone =
    R"({"durable_name":"c2","deliver_policy":"all","ack_policy":"none","max_deliver":-1,)"
    R"("replay_policy":"instant","deliver_subject":"x.z","num_replicas":0})";

std::unique_ptr<NatsServer> StartServer(const testing::NatsServerOptions& base = {}) {
  testing::NatsServerOptions options = base;
  options.users_conf = testing::ReconcilerUsersConf();
  return NatsServer::Start(options);
}

std::unique_ptr<BusConnection> Connect(const NatsServer& server) {
  auto bus = BusConnection::Connect(testing::BusSettingsFor(server));
  REQUIRE(bus.ok());
  return std::move(*bus);
}

// Creates the streams, then the consumers, the way apply does: the codec's JSON, pipelined.
void Create(BusConnection& bus, const std::vector<StreamSpec>& streams,
            const std::vector<ConsumerSpec>& consumers) {
  std::vector<ApiRequest> requests;
  for (const StreamSpec& s : streams) {
    requests.push_back({"$JS.API.STREAM.CREATE." + s.name.str(), EncodeStreamConfig(s)});
  }
  std::vector<ApiRequest> consumer_requests;
  for (const ConsumerSpec& c : consumers) {
    consumer_requests.push_back(
        {"$JS.API.CONSUMER.DURABLE.CREATE." + c.stream.str() + "." + c.durable.str(),
         EncodeConsumerCreate(c)});
  }
  for (const auto* batch : {&requests, &consumer_requests}) {  // streams first
    std::vector<ApiReply> replies = bus.RequestMany(*batch);
    for (size_t i = 0; i < replies.size(); ++i) {
      INFO((*batch)[i].subject << " " << (*batch)[i].payload << " -> " << replies[i].payload);
      REQUIRE(replies[i].status.ok());
      REQUIRE_FALSE(ParseApiError(replies[i].payload).has_value());
    }
  }
}

StreamSpec SeatStream(const std::string& seat) {
  StreamSpec spec;
  spec.name = StreamName("SEAT_" + seat);
  spec.subjects = {"mesh.work." + seat + ".*"};
  spec.retention = Retention::kWorkQueue;
  spec.description = model::OwnershipMark("test");
  return spec;
}

ConsumerSpec Worker(const std::string& seat) {
  ConsumerSpec spec;
  spec.stream = StreamName("SEAT_" + seat);
  spec.durable = ConsumerName("worker");
  spec.deliver_subject = "mesh.q." + seat;
  spec.deliver_group = seat;
  spec.max_deliver = model::kSeatMaxDeliver;
  return spec;
}

TEST_CASE("ParseApiError reads the API's error object", "[observers]") {
  auto error = ParseApiError(
      R"({"type":"x","error":{"code":404,"err_code":10059,"description":"stream not found"}})");
  REQUIRE(error.has_value());
  CHECK(error->code == 404);
  CHECK(error->err_code == 10059);
  CHECK(error->description == "stream not found");
  CHECK_FALSE(ParseApiError(R"({"type":"x","total":0})").has_value());
  CHECK_FALSE(ParseApiError("not json").has_value());
  CHECK_FALSE(ParseApiError("").has_value());
}

TEST_CASE("DecodeStreamConfig normalises a 2.9 stream config", "[observers]") {
  auto spec = DecodeStreamConfig(kServerStreamConfig);
  REQUIRE(spec.ok());
  CHECK(spec->name.str() == "A");
  CHECK(spec->subjects == std::vector<std::string>{"a.>", "b.>"});  // sorted
  CHECK(spec->retention == Retention::kWorkQueue);
  CHECK(spec->storage == Storage::kFile);
  CHECK(spec->replicas == 1);
  CHECK(spec->max_age_ns == 0);
  CHECK(spec->max_msgs == -1);
  CHECK(spec->max_bytes == -1);
  CHECK(spec->discard == Discard::kOld);
  CHECK(spec->description.empty());
}

TEST_CASE("DecodeStreamConfig makes omitted fields the server's defaults", "[observers]") {
  auto spec = DecodeStreamConfig(R"({"name":"M","subjects":["x","x"]})");
  REQUIRE(spec.ok());
  StreamSpec expected;
  expected.name = StreamName("M");
  expected.subjects = {"x"};
  CHECK(*spec == expected);

  auto other = DecodeStreamConfig(
      R"({"name":"N","retention":"interest","storage":"memory","discard":"new",)"
      R"("num_replicas":3,"max_age":5000000000,"max_msgs":7,"max_bytes":0,"description":"d"})");
  REQUIRE(other.ok());
  CHECK(other->retention == Retention::kInterest);
  CHECK(other->storage == Storage::kMemory);
  CHECK(other->discard == Discard::kNew);
  CHECK(other->replicas == 3);
  CHECK(other->max_age_ns == 5 * model::kNanosPerSecond);
  CHECK(other->max_msgs == 7);
  CHECK(other->max_bytes == -1);
  CHECK(other->description == "d");
}

TEST_CASE("DecodeStreamConfig refuses what it cannot represent", "[observers]") {
  CHECK_FALSE(DecodeStreamConfig(R"({"subjects":["x"]})").ok());  // no name
  CHECK_FALSE(DecodeStreamConfig(R"({"name":"A","retention":"forever"})").ok());
  CHECK_FALSE(DecodeStreamConfig("[]").ok());
  CHECK(DecodeStreamConfig("{").status().code() == Errc::kInternal);
}

TEST_CASE("DecodeConsumerConfig normalises a 2.9 consumer config", "[observers]") {
  auto spec = DecodeConsumerConfig("A", kServerConsumerConfigAckNone);
  REQUIRE(spec.ok());
  CHECK(spec->stream.str() == "A");
  CHECK(spec->durable.str() == "c2");
  CHECK(spec->ack == AckPolicy::kNone);
  CHECK(spec->ack_wait_ns == model::kAckWaitNanos);  // omitted for ack none
  CHECK(spec->deliver == DeliverPolicy::kAll);
  CHECK(spec->replay == ReplayPolicy::kInstant);
  CHECK(spec->max_deliver == -1);
  CHECK(spec->deliver_subject == "x.z");
  CHECK(spec->deliver_group.empty());
  CHECK(spec->filter_subject.empty());

  auto defaults = DecodeConsumerConfig("S", "{}");
  REQUIRE(defaults.ok());
  CHECK(defaults->ack == AckPolicy::kNone);
  CHECK(defaults->durable.empty());  // ephemeral

  auto full = DecodeConsumerConfig(
      "S", R"({"durable_name":"d","deliver_policy":"by_start_sequence","ack_policy":"all",)"
           R"("replay_policy":"original","ack_wait":5000,"max_deliver":3,"filter_subject":"f",)"
           R"("deliver_group":"g"})");
  REQUIRE(full.ok());
  CHECK(full->deliver == DeliverPolicy::kByStartSequence);
  CHECK(full->ack == AckPolicy::kAll);
  CHECK(full->replay == ReplayPolicy::kOriginal);
  CHECK(full->ack_wait_ns == 5000);
  CHECK(full->max_deliver == 3);
  CHECK(full->filter_subject == "f");
  CHECK(full->deliver_group == "g");
  CHECK_FALSE(DecodeConsumerConfig("S", R"({"ack_policy":"sometimes"})").ok());
}

TEST_CASE("Encoded configs decode to the same specs", "[observers]") {
  StreamSpec stream = SeatStream("billing");
  stream.subjects = {"b", "a"};
  auto decoded = DecodeStreamConfig(EncodeStreamConfig(stream));
  REQUIRE(decoded.ok());
  stream.subjects = {"a", "b"};
  CHECK(*decoded == stream);

  ConsumerSpec consumer = Worker("billing");
  consumer.filter_subject = "mesh.work.billing.render";
  const std::string create = EncodeConsumerCreate(consumer);
  CHECK(create.rfind(R"({"stream_name":"SEAT_billing","config":{)", 0) == 0);
  const std::string config = create.substr(create.find("\"config\":") + 9);
  auto decoded_consumer = DecodeConsumerConfig("SEAT_billing", config.substr(0, config.size() - 1));
  REQUIRE(decoded_consumer.ok());
  CHECK(*decoded_consumer == consumer);
}

TEST_CASE("Observing an empty account gives empty lists", "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = Connect(*server);
  auto observed = ObserveJetStream(*bus);
  REQUIRE(observed.ok());
  CHECK(observed->streams.empty());
  CHECK(observed->consumers.empty());
  CHECK(observed->cluster_size == 1);
  CHECK(observed->api_requests == 1);
}

TEST_CASE("Observing an account without JetStream is refused with the API's reason",
          "[observers][integration][server]") {
  testing::NatsServerOptions options;
  options.users_conf = R"(accounts { MESH { users: [ { user: "mesh-reconciler", password: ")" +
                       std::string(testing::kReconcilerPassword) + R"(" } ] } })";
  auto server = NatsServer::Start(options);
  auto bus = Connect(*server);
  auto observed = ObserveJetStream(*bus);
  REQUIRE_FALSE(observed.ok());
  INFO(observed.status().ToString());
  CHECK(observed.status().code() == Errc::kRefused);
  CHECK(observed.status().message().find("10039") != std::string::npos);
}

TEST_CASE("Derived streams and consumers read back exactly as derived",
          "[observers][integration][server]") {
  // Every kind of object the contract derives (sections 2 and 3), at the smallest events max
  // age the contract allows (the duplicate window must fit in it) and at the default.
  const int64_t max_age_seconds = GENERATE(120, 604800);
  const std::string records_json = R"({
    "version": 1, "mesh": "demo",
    "bus": { "account": "MESH", "replicas": 1, "events_max_age_seconds": )" +
                                   std::to_string(max_age_seconds) + R"( },
    "controller": { "user": "mesh-controller", "password": "c",
                    "submits_to": ["mesh-build"], "follows": ["invoicer.invoiced"] },
    "nodes": [ { "name": "node-a", "password": "a" }, { "name": "node-b", "password": "b" } ],
    "modules": [ { "name": "billing", "password": "m",
      "seats": [ { "name": "invoicer", "accepts": ["render"], "emits": ["invoiced"],
                   "uses": ["mesh-build"] } ],
      "follows": ["mesh-build.built"] } ],
    "roles": [ { "name": "mesh-build", "accepts": ["build"], "emits": ["built"], "uses": [],
                 "holders": ["node-b"] } ]
  })";
  model::ParseOutcome parsed = model::ParseRecords(records_json);
  REQUIRE(parsed.ok());
  model::DesiredState desired = model::Derive(parsed.records, model::ReconcilerIdentity{});
  REQUIRE(desired.streams.size() == 5);    // CONTROL, DECL, EVENTS, 2 seats
  REQUIRE(desired.consumers.size() == 7);  // controller, 2 decl, 2 workers, 2 followers

  auto server = StartServer();
  auto bus = Connect(*server);
  Create(*bus, desired.streams, desired.consumers);
  auto observed = ObserveJetStream(*bus);
  REQUIRE(observed.ok());
  REQUIRE(observed->streams.size() == desired.streams.size());
  for (size_t i = 0; i < desired.streams.size(); ++i) {
    INFO(desired.streams[i].name.str());
    CHECK(observed->streams[i].config == desired.streams[i]);
  }
  REQUIRE(observed->consumers.size() == desired.consumers.size());
  for (size_t i = 0; i < desired.consumers.size(); ++i) {
    INFO(desired.consumers[i].stream.str() << "/" << desired.consumers[i].durable.str());
    CHECK(observed->consumers[i].config == desired.consumers[i]);
  }
  CHECK(observed->api_requests == 1 + static_cast<int>(desired.streams.size()));

  // Creating again with the same configuration is accepted and changes nothing.
  Create(*bus, desired.streams, desired.consumers);
  auto again = ObserveJetStream(*bus);
  REQUIRE(again.ok());
  CHECK(again->streams.size() == observed->streams.size());
  for (size_t i = 0; i < again->streams.size(); ++i) {
    CHECK(again->streams[i].config == observed->streams[i].config);
  }
}

// A pass that created a stream and its consumers passes them as known (ObserveScope): they are
// taken as given only while the stream, as listed, counts exactly that many consumers.
TEST_CASE("known consumers are not listed again while the stream counts exactly them",
          "[observers][integration][server]") {
  StreamSpec stream;
  stream.name = StreamName("KNOWN");
  stream.subjects = {"known.>"};
  ConsumerSpec first;
  first.stream = stream.name;
  first.durable = ConsumerName("first");
  first.filter_subject = "known.a";
  ConsumerSpec second = first;
  second.durable = ConsumerName("second");
  second.filter_subject = "known.b";
  auto server = StartServer();
  auto bus = Connect(*server);
  Create(*bus, {stream}, {first, second});

  KnownConsumers known;
  ObserveScope scope;
  scope.known_consumers = &known;
  SECTION("both known: the stream list alone, the known entries as given") {
    known[stream.name] = {{first, "", ""}, {second, "", ""}};
    auto observed = ObserveJetStream(*bus, scope);
    REQUIRE(observed.ok());
    CHECK(observed->api_requests == 1);
    REQUIRE(observed->streams.size() == 1);
    CHECK(observed->streams[0].consumer_count == 2);
    REQUIRE(observed->consumers.size() == 2);
    CHECK(observed->consumers[0].config == first);
    CHECK(observed->consumers[0].raw_config.empty());  // as given, not as listed
  }
  SECTION("one of two known: the count differs, the consumers are listed") {
    known[stream.name] = {{first, "", ""}};
    auto observed = ObserveJetStream(*bus, scope);
    REQUIRE(observed.ok());
    CHECK(observed->api_requests == 2);
    REQUIRE(observed->consumers.size() == 2);
    CHECK(observed->consumers[0].config == first);
    CHECK_FALSE(observed->consumers[0].raw_config.empty());  // as the server listed it
    CHECK(observed->consumers[1].config == second);
  }
}

// An update reads the server's whole config (raw_config); an object exactly as desired has none
// coming, so with the desired state in the scope only the others keep it (issue 39: at ten
// times the Large mesh the configs held for nothing were about 30 MiB).
TEST_CASE("with the desired state in scope, only what differs from it keeps its raw config",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = Connect(*server);
  std::vector<StreamSpec> streams = {SeatStream("alpha"), SeatStream("beta")};
  std::vector<ConsumerSpec> consumers = {Worker("alpha"), Worker("beta")};
  Create(*bus, streams, consumers);

  model::DesiredState desired;
  desired.streams = {streams[0]};  // beta is not desired at all: nothing updates it either
  desired.consumers = {Worker("alpha"), Worker("beta")};
  desired.consumers[1].max_deliver = 7;  // beta's worker differs from what the server holds
  ObserveScope scope;
  scope.desired = &desired;
  for (const bool named : {false, true}) {
    INFO((named ? "ObserveStreams" : "ObserveJetStream"));
    auto observed = named ? ObserveStreams(*bus, {streams[0].name, streams[1].name}, scope)
                          : ObserveJetStream(*bus, scope);
    REQUIRE(observed.ok());
    REQUIRE(observed->streams.size() == 2);
    CHECK(observed->streams[0].config == streams[0]);
    CHECK(observed->streams[0].raw_config.empty());  // as desired
    CHECK_FALSE(observed->streams[1].raw_config.empty());
    REQUIRE(observed->consumers.size() == 2);
    CHECK(observed->consumers[0].config == consumers[0]);
    CHECK(observed->consumers[0].raw_config.empty());  // as desired
    CHECK(observed->consumers[1].config == consumers[1]);
    CHECK(observed->consumers[1].raw_config.find("\"durable_name\":\"") != std::string::npos);
  }
  // Without a desired state, every object keeps it.
  auto all = ObserveJetStream(*bus);
  REQUIRE(all.ok());
  for (const auto& s : all->streams) CHECK_FALSE(s.raw_config.empty());
  for (const auto& c : all->consumers) CHECK_FALSE(c.raw_config.empty());
}

TEST_CASE("Observing 600 streams and a stream with 300 consumers pages through every list",
          "[observers][integration][server]") {
  auto server = StartServer();
  auto bus = Connect(*server);
  std::vector<StreamSpec> streams;
  std::vector<ConsumerSpec> consumers;
  for (int i = 0; i < 600; ++i) {
    const std::string seat = "s" + std::to_string(1000 + i);
    streams.push_back(SeatStream(seat));
    consumers.push_back(Worker(seat));
  }
  // A work queue takes one unfiltered consumer; a limits stream takes any number.
  StreamSpec many;
  many.name = StreamName("MANY");
  many.subjects = {"many.>"};
  streams.push_back(many);
  for (int i = 0; i < 300; ++i) {
    ConsumerSpec consumer;
    consumer.stream = many.name;
    consumer.durable = ConsumerName("c" + std::to_string(1000 + i));
    consumer.deliver_subject = "out.many." + std::to_string(i);
    consumers.push_back(consumer);
  }
  std::sort(streams.begin(), streams.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  Create(*bus, streams, consumers);

  const int64_t sent_before = bus->requests_sent();
  auto observed = ObserveJetStream(*bus);
  REQUIRE(observed.ok());
  REQUIRE(observed->streams.size() == 601);
  REQUIRE(observed->consumers.size() == 900);
  for (size_t i = 0; i < streams.size(); ++i) REQUIRE(observed->streams[i].config == streams[i]);
  std::sort(consumers.begin(), consumers.end(), [](const auto& a, const auto& b) {
    return std::tie(a.stream, a.durable) < std::tie(b.stream, b.durable);
  });
  for (size_t i = 0; i < consumers.size(); ++i) {
    REQUIRE(observed->consumers[i].config == consumers[i]);
  }
  // 3 stream pages; 601 first consumer pages; 1 more page for the 300 consumers of MANY.
  CHECK(observed->api_requests == 3 + 601 + 1);
  CHECK(bus->requests_sent() - sent_before == observed->api_requests);
}

TEST_CASE("A clustered bus: an R3 stream is observed with its group size, and has a leader",
          "[observers][integration][server]") {
  testing::NatsClusterOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  auto cluster = testing::NatsCluster::Start(options);
  auto bus = Connect(cluster->member(0));

  // Before any stream exists the bus cannot tell a cluster from a standalone server; the
  // monitoring endpoint knows the meta group's size.
  ObservedState state;
  auto empty = ObserveJetStream(*bus);
  REQUIRE(empty.ok());
  state.jetstream = *empty;
  CHECK(state.jetstream.cluster_size == 1);
  state.server = ObserveServer(cluster->member(1).monitor_url(), std::chrono::seconds(2));
  CHECK(state.server.jetstream_cluster_size == 3);
  CHECK(JetStreamClusterSize(state) == 3);

  StreamSpec r3 = SeatStream("replicated");
  r3.replicas = 3;
  // A stream create right after the meta leader's election may still be refused: retry.
  REQUIRE(testing::WaitFor([&] {
    ApiReply reply =
        bus->Request({"$JS.API.STREAM.CREATE.SEAT_replicated", EncodeStreamConfig(r3)});
    return reply.status.ok() && !ParseApiError(reply.payload).has_value();
  }));
  auto observed = ObserveJetStream(*bus);
  REQUIRE(observed.ok());
  REQUIRE(observed->streams.size() == 1);
  CHECK(observed->streams[0].config == r3);
  CHECK(observed->cluster_size == 3);  // an R3 stream shows its whole group
  ApiReply info = bus->Request({"$JS.API.STREAM.INFO.SEAT_replicated", ""});
  REQUIRE(info.status.ok());
  rapidjson::Document doc;
  doc.Parse(info.payload.c_str());
  INFO(info.payload);
  REQUIRE((doc.IsObject() && doc.HasMember("cluster") && doc["cluster"].HasMember("leader")));
  CHECK(doc["cluster"]["leader"].GetStringLength() > 0);
}

}  // namespace
}  // namespace mesh::observers

namespace mesh::observers {
namespace {

// A 2.10.27 stream config with fields the reconciler does not own, set by an operator.
constexpr const char* kHandTunedStream =
    R"({"name":"EVENTS","subjects":["mesh.evt.>"],"retention":"limits","max_consumers":-1,)"
    R"("max_msgs":-1,"max_bytes":-1,"max_age":604800000000000,"max_msgs_per_subject":100,)"
    R"("max_msg_size":-1,"discard":"old","storage":"file","num_replicas":1,)"
    R"("duplicate_window":120000000000,"compression":"s2","allow_direct":true,)"
    R"("mirror_direct":false,"sealed":false,"deny_delete":false,"deny_purge":false,)"
    R"("allow_rollup_hdrs":false,"consumer_limits":{},)"
    R"("metadata":{"owner":"ops","_nats.ver":"2.11.0","_nats.level":"1"},)"
    R"("description":"mesh t: managed by mesh-reconciler"})";

TEST_CASE("a stream update keeps every field the mesh does not own", "[observers]") {
  auto observed = DecodeObservedStream(kHandTunedStream);
  REQUIRE(observed.ok());
  CHECK(observed->problem.empty());
  StreamSpec wanted = observed->config;
  wanted.max_age_ns = 3600 * model::kNanosPerSecond;
  wanted.subjects = {"mesh.evt.>", "other.>"};
  wanted.description = "";
  const std::string body = EncodeStreamUpdate(wanted, observed->raw_config);
  rapidjson::Document doc;
  doc.Parse(body.c_str());
  REQUIRE(doc.IsObject());
  CHECK(doc["max_age"].GetInt64() == 3600 * model::kNanosPerSecond);
  CHECK(doc["subjects"].Size() == 2);
  CHECK_FALSE(doc.HasMember("description"));  // owned, and the spec has none
  CHECK(doc["compression"] == "s2");
  CHECK(doc["allow_direct"].GetBool());
  CHECK(doc["max_msgs_per_subject"].GetInt64() == 100);
  CHECK(doc["metadata"]["owner"] == "ops");
  CHECK(doc["duplicate_window"].GetInt64() == 120000000000);
  auto back = DecodeStreamConfig(body);
  REQUIRE(back.ok());
  std::sort(wanted.subjects.begin(), wanted.subjects.end());
  CHECK(*back == wanted);

  SECTION("a max_age below the duplicate window lets the server pick the window") {
    wanted.max_age_ns = 60 * model::kNanosPerSecond;
    doc.Parse(EncodeStreamUpdate(wanted, observed->raw_config).c_str());
    CHECK(doc["duplicate_window"].GetInt64() == 0);
  }
  SECTION("without an observed config, the create body") {
    CHECK(EncodeStreamUpdate(wanted, "") == EncodeStreamConfig(wanted));
  }
}

TEST_CASE("a consumer update keeps every field the mesh does not own", "[observers]") {
  constexpr const char* kHandTuned =
      R"({"durable_name":"worker","name":"worker","deliver_policy":"all","ack_policy":"explicit",)"
      R"("ack_wait":30000000000,"max_deliver":3,"filter_subjects":["a","b"],)"
      R"("replay_policy":"instant","max_ack_pending":7,"inactive_threshold":3600000000000,)"
      R"("deliver_subject":"mesh.q.x","deliver_group":"x","num_replicas":0,)"
      R"("metadata":{"owner":"ops"}})";
  auto observed = DecodeObservedConsumer("SEAT_x", kHandTuned);
  REQUIRE(observed.ok());
  ConsumerSpec wanted = observed->config;
  wanted.max_deliver = 10;
  wanted.filter_subject = "mesh.work.x.*";
  wanted.deliver_group = "";
  const std::string body =
      EncodeConsumerUpdate(wanted, observed->raw_config, ConsumerRequest::kUpdate);
  rapidjson::Document doc;
  doc.Parse(body.c_str());
  REQUIRE(doc.IsObject());
  CHECK(doc["stream_name"] == "SEAT_x");
  CHECK(doc["action"] == "update");
  const auto& config = doc["config"];
  CHECK(config["max_deliver"].GetInt64() == 10);
  CHECK(config["filter_subject"] == "mesh.work.x.*");
  CHECK_FALSE(config.HasMember("filter_subjects"));  // 2.10 refuses both (10136)
  CHECK_FALSE(config.HasMember("deliver_group"));
  CHECK(config["max_ack_pending"].GetInt64() == 7);
  CHECK(config["inactive_threshold"].GetInt64() == 3600000000000);
  CHECK(config["metadata"]["owner"] == "ops");
  CHECK(config["name"] == "worker");

  CHECK(EncodeConsumerUpdate(wanted, observed->raw_config).find("\"action\"") ==
        std::string::npos);  // 2.9: no action field
  CHECK(EncodeConsumerCreate(wanted, ConsumerRequest::kCreate).find(R"("action":"create")") !=
        std::string::npos);
}

TEST_CASE("an unknown value is a problem of its object, decoded with the rest", "[observers]") {
  auto stream = DecodeObservedStream(
      R"({"name":"KV_x","subjects":["$KV.x.>"],"retention":"forever","storage":"file"})");
  REQUIRE(stream.ok());
  CHECK(stream->config.name.str() == "KV_x");
  CHECK(stream->config.subjects == std::vector<std::string>{"$KV.x.>"});
  CHECK(stream->problem == R"(config.retention: unknown value "forever")");
  auto consumer = DecodeObservedConsumer(
      "S", R"({"durable_name":"d","ack_policy":"flow","replay_policy":"fast","max_deliver":4})");
  REQUIRE(consumer.ok());
  CHECK(consumer->config.max_deliver == 4);
  CHECK(consumer->problem ==
        R"(config.ack_policy: unknown value "flow"; config.replay_policy: unknown value "fast")");
  CHECK_FALSE(DecodeObservedStream(R"({"subjects":["x"]})").ok());  // names no stream
}

TEST_CASE("the _nats.* metadata newer servers add is never compared", "[observers]") {
  // 2.11+ add _nats.req.level, _nats.ver, _nats.level to stream and consumer metadata.
  auto with = DecodeObservedStream(kHandTunedStream);
  std::string plain = kHandTunedStream;
  plain.replace(
      plain.find(R"("metadata")"),
      std::string(R"("metadata":{"owner":"ops","_nats.ver":"2.11.0","_nats.level":"1"},)").size(),
      "");
  auto without = DecodeObservedStream(plain);
  REQUIRE(with.ok());
  REQUIRE(without.ok());
  CHECK(with->config == without->config);
}

}  // namespace
}  // namespace mesh::observers
