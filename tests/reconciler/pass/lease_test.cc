// The lease: its decisions against a fake KV key with a test-driven clock (acquire, renew,
// expiry, lost answers, an unreachable store), the gate on a pass's actions, and the real
// JetStream KV store on a real nats-server, where two instances compete for it with the
// reconciler's own restricted permissions.
#include "reconciler/plan/lease.h"

#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <map>
#include <optional>

#include "observers/bus.h"
#include "observers/jetstream.h"
#include "reconciler/base/log.h"
#include "reconciler/pass/lease_store.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_client.h"
#include "tests/support/nats_server.h"

namespace mesh::reconciler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = LeaseClock;

constexpr milliseconds kTtl{4000};

// The KV key as the server keeps it: history 1, entries aged out `ttl` after they were stored,
// compare-and-set on the last revision. Time is the test's; failures are injected.
class FakeStore : public LeaseStore {
 public:
  explicit FakeStore(Clock::time_point start, milliseconds ttl = kTtl) : now(start), ttl_(ttl) {}

  Result<uint64_t> Create(const std::string& holder) override { return Write(holder, 0); }
  Result<uint64_t> Update(const std::string& holder, uint64_t last_revision) override {
    return Write(holder, last_revision);
  }
  Result<std::optional<LeaseEntry>> Get() override {
    ++reads;
    if (unreachable) return Status(Errc::kTimeout, "no answer");
    if (!Live()) return std::optional<LeaseEntry>();
    return std::optional<LeaseEntry>(entry);
  }
  milliseconds ttl() const override { return ttl_; }

  bool Live() const { return entry.revision != 0 && now < stored_at + ttl_; }

  Clock::time_point now;
  bool unreachable = false;
  int lose_answers = 0;  // writes that are stored but answered with a timeout
  int writes = 0;
  int reads = 0;
  LeaseEntry entry;
  Clock::time_point stored_at{};
  uint64_t sequence = 0;

 private:
  milliseconds ttl_;
  Result<uint64_t> Write(const std::string& holder, uint64_t expected) {
    ++writes;
    if (unreachable) return Status(Errc::kTimeout, "no answer");
    const uint64_t last = Live() ? entry.revision : 0;
    if (last != expected) return Status(Errc::kRefused, "wrong last sequence");
    entry = {holder, ++sequence};
    stored_at = now;
    if (lose_answers > 0) {
      --lose_answers;
      return Status(Errc::kTimeout, "no answer");
    }
    return entry.revision;
  }
};

const Clock::time_point kStart = Clock::time_point() + seconds(1000);

TEST_CASE("The first instance acquires the lease, a second one is standby and names it",
          "[lease]") {
  FakeStore store(kStart);
  Lease a("pod-a-00000001");
  Lease b("pod-b-00000002");
  CHECK_FALSE(a.MayAct(kStart));  // no round yet

  LeaseState held = a.TryAcquireOrRenew(store, kStart);
  CHECK(held.role == LeaseRole::kHolder);
  CHECK(held.holder == "pod-a-00000001");
  CHECK(held.revision == 1);
  CHECK(a.MayAct(kStart));

  LeaseState other = b.TryAcquireOrRenew(store, kStart);
  CHECK(other.role == LeaseRole::kStandby);
  CHECK(other.holder == "pod-a-00000001");
  CHECK_FALSE(b.MayAct(kStart));
  CHECK(store.entry.holder == "pod-a-00000001");  // b wrote nothing over it
}

TEST_CASE("The holder renews with its last revision and may act for 3/4 of the time to live",
          "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  Lease b("b-2");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);
  CHECK(a.MayAct(kStart + kTtl * 3 / 4 - milliseconds(1)));
  CHECK_FALSE(a.MayAct(kStart + kTtl * 3 / 4));

  // Renewing every half time to live for a long while: a keeps it, b never gets it.
  for (int i = 1; i <= 20; ++i) {
    store.now = kStart + i * kTtl / 2;
    const int writes_before = store.writes;
    LeaseState renewed = a.TryAcquireOrRenew(store, store.now);
    CHECK(renewed.role == LeaseRole::kHolder);
    CHECK(renewed.revision == static_cast<uint64_t>(i + 1));
    CHECK(store.writes == writes_before + 1);  // one update, no read
    CHECK(b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kStandby);
  }
}

TEST_CASE("A holder that stops renewing ages out, and the other instance acquires after expiry",
          "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  Lease b("b-2");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);

  store.now = kStart + kTtl - milliseconds(1);
  CHECK(b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kStandby);
  CHECK_FALSE(a.MayAct(store.now));  // a stopped acting well before its entry aged out

  store.now = kStart + kTtl;
  LeaseState taken = b.TryAcquireOrRenew(store, store.now);
  CHECK(taken.role == LeaseRole::kHolder);
  CHECK(taken.holder == "b-2");
  CHECK(b.MayAct(store.now));

  // a comes back: its renewal is refused and it learns who holds the lease now.
  LeaseState back = a.TryAcquireOrRenew(store, store.now);
  CHECK(back.role == LeaseRole::kStandby);
  CHECK(back.holder == "b-2");
  CHECK_FALSE(a.MayAct(store.now));
}

TEST_CASE("Renew only while passes plan: failing, within the grace take part, after it step down",
          "[lease]") {
  const milliseconds interval{10000};
  const milliseconds grace = LeaseGraceFor(interval);
  CHECK(grace == milliseconds(5000));
  CHECK(LeaseGraceFor(milliseconds(500)) == milliseconds(1000));
  const auto kStopped = LastPass::kStoppedBeforePlan;
  // The last pass planned: take part, however long ago (passes come once an interval).
  CHECK(ParticipationFor(LastPass::kPlanned, kStart, kStart + interval * 2, grace) ==
        LeaseParticipation::kTakePart);
  // Never planned: never renew, never acquire.
  CHECK(ParticipationFor(kStopped, std::nullopt, kStart, grace) == LeaseParticipation::kStepDown);
  // Failing since: take part within the grace after the last pass that planned, then step down.
  CHECK(ParticipationFor(kStopped, kStart, kStart, grace) == LeaseParticipation::kTakePart);
  CHECK(ParticipationFor(kStopped, kStart, kStart + grace, grace) == LeaseParticipation::kTakePart);
  CHECK(ParticipationFor(kStopped, kStart, kStart + grace + milliseconds(1), grace) ==
        LeaseParticipation::kStepDown);
  // A holder that steps down at the end of its grace has released well before its entry
  // would have aged out (the time to live is at least 1.5 intervals).
  CHECK(grace + LeaseRoundFor(interval) < LeaseTtlFor(interval, seconds(5)));
}

TEST_CASE("A released lease is free at once: the other instance's next round takes it", "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  Lease b("b-2");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);
  REQUIRE(b.TryAcquireOrRenew(store, kStart).role == LeaseRole::kStandby);

  store.now = kStart + milliseconds(10);  // long before the entry would age out
  REQUIRE(a.Release(store).ok());
  CHECK(a.state().role == LeaseRole::kStandby);
  CHECK_FALSE(a.MayAct(store.now));
  CHECK(store.entry.holder.empty());

  LeaseState taken = b.TryAcquireOrRenew(store, store.now);
  CHECK(taken.role == LeaseRole::kHolder);
  CHECK(taken.holder == "b-2");
  CHECK(b.MayAct(store.now));
  // Releasing what one does not hold writes nothing.
  const int writes = store.writes;
  CHECK(a.Release(store).ok());
  CHECK(store.writes == writes);
  CHECK(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kStandby);
}

TEST_CASE("A release that gets no answer still stops the holder acting", "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);
  store.unreachable = true;
  CHECK_FALSE(a.Release(store).ok());
  CHECK_FALSE(a.MayAct(kStart));
}

TEST_CASE("A holder whose last round got no answer still releases the entry it wrote", "[lease]") {
  // SIGTERM right after a round that timed out: the entry still names this instance (the
  // server stored the last renewal), so it is written free, not left to age out.
  FakeStore store(kStart);
  Lease a("a-1");
  Lease b("b-2");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);
  store.unreachable = true;
  store.now = kStart + milliseconds(100);
  REQUIRE(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kUnknown);
  store.unreachable = false;
  REQUIRE(a.Release(store).ok());
  CHECK(store.entry.holder.empty());
  CHECK(b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);

  // The same, but its entry moved on meanwhile (aged out, then taken by another): the write is
  // refused and the other's entry stays.
  store.now += kTtl;
  REQUIRE(b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);
  store.unreachable = true;
  REQUIRE(b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kUnknown);
  store.unreachable = false;
  store.now += kTtl;
  Lease c("c-3");
  REQUIRE(c.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);
  CHECK_FALSE(b.Release(store).ok());
  CHECK(store.entry.holder == "c-3");
  CHECK_FALSE(b.MayAct(store.now));
  // A standby holds nothing: it writes nothing.
  const int writes = store.writes;
  CHECK(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kStandby);
  const int after_round = store.writes;
  CHECK(a.Release(store).ok());
  CHECK(store.writes == after_round);
  CHECK(after_round > writes);
}

// Two instances running lease rounds every LeaseRoundFor(interval), as the loop does between
// passes, with the time to live the daemon uses: while the holder lives the other stays
// standby; whenever the holder dies (any moment of its round, any phase of the other's rounds)
// the other holds the lease within two intervals; never may both act.
TEST_CASE(
    "With the daemon's round and time to live, a dead holder is replaced within two "
    "intervals",
    "[lease]") {
  const milliseconds interval = seconds(4);
  const milliseconds round = LeaseRoundFor(interval);
  // A request timeout short enough that the interval sets the time to live (4 t <= 1.5 i).
  const milliseconds ttl = LeaseTtlFor(interval, milliseconds(1500));
  REQUIRE(ttl == interval * 3 / 2);
  const milliseconds step = round / 8;
  for (milliseconds phase{0}; phase < round; phase += step) {
    for (milliseconds death = 3 * round; death < 7 * round; death += step) {
      INFO("b's rounds offset by " << phase.count() << " ms; a dies at " << death.count() << " ms");
      FakeStore store(kStart, ttl);
      Lease a("a-1");
      Lease b("b-2");
      milliseconds next_a{0};
      milliseconds next_b = phase + step;  // b starts after a holds
      std::optional<milliseconds> taken_at;
      for (milliseconds t{0}; t <= death + 3 * interval && !taken_at; t += step) {
        store.now = kStart + t;
        if (t == next_a && t <= death) {
          REQUIRE(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);
          next_a += round;
        }
        if (t == next_b) {
          const LeaseRole role = b.TryAcquireOrRenew(store, store.now).role;
          if (t <= death) REQUIRE(role == LeaseRole::kStandby);  // a alive: never taken
          if (role == LeaseRole::kHolder) taken_at = t;
          next_b += round;
        }
        // a acts only while alive; never both at once.
        const bool both_act = t <= death && a.MayAct(store.now) && b.MayAct(store.now);
        CHECK_FALSE(both_act);
      }
      REQUIRE(taken_at.has_value());
      CHECK(*taken_at - death <= 2 * interval);
    }
  }
}

// Seen with three pods at --interval 2s (a 3 s time to live): the holder sent a STREAM.CREATE
// under its lease; the server, electing leaders after a member was lost, answered nothing within
// the request timeout, and carried it out; meanwhile the holder's entry aged out and another
// sidecar took the lease and acted too. A write must end (answered or timed out) before anyone
// else can hold the lease: the holder starts one only when it would end under the lease
// (AccessForWrite), and the time to live covers a renewal and such a write.
TEST_CASE(
    "A write started under the lease ends before another instance can hold it, however long "
    "the server takes to answer",
    "[lease]") {
  const milliseconds interval = seconds(2);
  const milliseconds timeout = seconds(5);  // the bus's request timeout (observers/bus.h)
  const milliseconds round = LeaseRoundFor(interval);
  const milliseconds step = round / 4;
  for (const milliseconds ttl : {LeaseTtlFor(interval, timeout), interval * 3 / 2}) {
    INFO("time to live " << ttl.count() << " ms");
    int writes = 0;
    for (milliseconds start = round; start < 3 * round + ttl; start += step) {
      INFO("a write starts at " << start.count() << " ms");
      FakeStore store(kStart, ttl);
      Lease a("a-1");
      Lease b("b-2");
      // a renews each round until the write would start; then it is busy with the write (as a
      // pass waiting for an answer is) and renews no more: the worst case.
      std::optional<Clock::time_point> write_ends;
      for (milliseconds t{0}; t <= start + 3 * ttl; t += step) {
        store.now = kStart + t;
        if (t < start && t % round == milliseconds(0)) a.TryAcquireOrRenew(store, store.now);
        if (t == start && AccessForWrite(a.state(), store.now, timeout) == JetStreamAccess::kAct) {
          write_ends = store.now + timeout;
          ++writes;
        }
        if (t % round == milliseconds(0) && t > milliseconds(0) &&
            b.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder) {
          // b holds only after a's write has ended, whenever it started.
          if (write_ends) CHECK(store.now >= *write_ends);
          break;
        }
      }
    }
    if (ttl == LeaseTtlFor(interval, timeout)) {
      CHECK(writes > 0);  // the holder can act: a renewal leaves room for a whole write
    } else {
      CHECK(writes == 0);  // a bucket's 3 s: never room for a 5 s write (raised: KvLeaseStore)
    }
  }
  // Right after a renewal, a whole write fits.
  FakeStore store(kStart, LeaseTtlFor(interval, timeout));
  Lease a("a-1");
  REQUIRE(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);
  CHECK(AccessForWrite(a.state(), store.now + timeout, timeout) == JetStreamAccess::kAct);
  LeaseState off;
  CHECK(AccessForWrite(off, kStart, std::chrono::hours(1)) == JetStreamAccess::kAct);
}

TEST_CASE("A lost answer: the entry shows our identity, and the next write renews from it",
          "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  store.lose_answers = 1;
  LeaseState state = a.TryAcquireOrRenew(store, kStart);
  CHECK(state.role == LeaseRole::kHolder);  // create (stored, unanswered), read, update
  CHECK(state.revision == 2);
  CHECK(store.writes == 2);
  CHECK(store.reads == 1);
}

TEST_CASE("A read alone never makes an instance the holder", "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  store.lose_answers = 2;  // both writes stored but unanswered
  LeaseState state = a.TryAcquireOrRenew(store, kStart);
  CHECK(state.role == LeaseRole::kUnknown);
  CHECK_FALSE(a.MayAct(kStart));
  CHECK(store.entry.holder == "a-1");
  // The next round renews from the revision it read.
  store.now = kStart + seconds(1);
  CHECK(a.TryAcquireOrRenew(store, store.now).role == LeaseRole::kHolder);
}

TEST_CASE("The store unreachable: the role is unknown and the holder stops acting at once",
          "[lease]") {
  FakeStore store(kStart);
  Lease a("a-1");
  REQUIRE(a.TryAcquireOrRenew(store, kStart).role == LeaseRole::kHolder);
  store.unreachable = true;
  store.now = kStart + seconds(1);
  LeaseState state = a.TryAcquireOrRenew(store, store.now);
  CHECK(state.role == LeaseRole::kUnknown);
  CHECK(state.error.find("timeout") != std::string::npos);
  CHECK_FALSE(a.MayAct(store.now));
  // Reachable again before the entry aged out: renewed from the revision it holds.
  store.unreachable = false;
  store.now = kStart + seconds(2);
  LeaseState again = a.TryAcquireOrRenew(store, store.now);
  CHECK(again.role == LeaseRole::kHolder);
  CHECK(again.revision == 2);
  CHECK(a.Unreachable("bucket gone").role == LeaseRole::kUnknown);
  CHECK_FALSE(a.MayAct(store.now));
}

Action Named(ActionKind kind, const std::string& name) {
  Action action;
  action.kind = kind;
  action.name = name;
  return action;
}

TEST_CASE("The gate: a standby applies only its users file, off or holding applies everything",
          "[lease]") {
  const std::vector<Action> actions = {Named(ActionKind::kWriteUsersFile, "/users.conf"),
                                       Named(ActionKind::kCreateStream, "CONTROL"),
                                       Named(ActionKind::kCreateConsumer, "CONTROL/controller"),
                                       Named(ActionKind::kReloadServer, "/users.conf")};
  LeaseState off;
  CHECK(AccessFor(off, kStart) == JetStreamAccess::kAct);
  LeaseState holder;
  holder.role = LeaseRole::kHolder;
  holder.valid_until = kStart + seconds(1);
  CHECK(AccessFor(holder, kStart) == JetStreamAccess::kAct);
  CHECK(AccessFor(holder, kStart + seconds(1)) == JetStreamAccess::kUsersFileOnly);
  LeaseState standby;
  standby.role = LeaseRole::kStandby;
  CHECK(AccessFor(standby, kStart) == JetStreamAccess::kUsersFileOnly);
  LeaseState unknown;
  unknown.role = LeaseRole::kUnknown;
  CHECK(AccessFor(unknown, kStart) == JetStreamAccess::kUsersFileOnly);

  CHECK(ActionsAllowed(actions, JetStreamAccess::kAct) == actions);
  const std::vector<Action> only_users = ActionsAllowed(actions, JetStreamAccess::kUsersFileOnly);
  REQUIRE(only_users.size() == 2);
  CHECK(only_users[0].kind == ActionKind::kWriteUsersFile);
  CHECK(only_users[1].kind == ActionKind::kReloadServer);
}

TEST_CASE("Lease identities, time to live and the extra permission", "[lease]") {
  CHECK(LeaseIdentity("mesh-nats-0", 0xabcdef01) == "mesh-nats-0-abcdef01");
  CHECK(LeaseIdentity("", 1) == "reconciler-00000001");
  CHECK(LeaseIdentity("a b/c>*", 2) == "a_b_c__-00000002");
  CHECK(LeaseIdentity(std::string(100, 'x'), 3).size() == 63 + 9);
  CHECK(NewLeaseIdentity() != NewLeaseIdentity());
  // The default interval and request timeout: 1.5 intervals.
  CHECK(LeaseTtlFor(seconds(30), seconds(5)) == seconds(45));
  // A short interval: four request timeouts.
  CHECK(LeaseTtlFor(seconds(2), seconds(5)) == seconds(20));
  CHECK(LeaseTtlFor(milliseconds(100), milliseconds(100)) == seconds(1));
  CHECK(LeaseRoundFor(seconds(30)) == milliseconds(7500));
  CHECK(LeaseRoundFor(milliseconds(100)) == milliseconds(250));
  for (const auto interval : {seconds(1), seconds(2), seconds(5), seconds(30), seconds(3600)}) {
    for (const milliseconds timeout :
         {milliseconds(250), milliseconds(1000), milliseconds(5000), milliseconds(30000)}) {
      INFO(interval.count() << " s, request timeout " << timeout.count() << " ms");
      const milliseconds ttl = LeaseTtlFor(interval, timeout);
      // A dead holder's entry ages out within the time to live; a standby's next round (at
      // most one round later) finds the key free: within two intervals whenever the interval
      // sets the time to live, else within it and a round.
      if (4 * timeout <= interval * 3 / 2) CHECK(ttl + LeaseRoundFor(interval) <= 2 * interval);
      // The holder renews several times within one time to live.
      CHECK(ttl >= 4 * LeaseRoundFor(interval));
      // A renewal and a write, each up to a request timeout, fit in what a holder may act.
      CHECK(2 * timeout <= ttl * 3 / 4);
    }
  }
  CHECK(LeasePublishAllow() == std::vector<std::string>{"$KV.mesh_reconciler_lease.holder",
                                                        "$KV.mesh_reconciler_lease.hold"});
  CHECK(std::string(ToString(LeaseRole::kHolder)) == "holder");
  CHECK(std::string(ToString(LeaseRole::kStandby)) == "standby");
}

// ---- Against a real nats-server ----------------------------------------------------------------

// One reconciler instance: its own connection as the reconciler's user, and its keeper.
struct Instance {
  Instance(const mesh::testing::NatsServer& server, const std::string& identity, milliseconds ttl,
           milliseconds timeout = seconds(2))
      : connection(mesh::testing::ConnectNats({server.url()}, mesh::testing::kReconcilerUser,
                                              mesh::testing::kReconcilerPassword)),
        keeper(LeaseSettings{identity, ttl, timeout}) {}
  LeaseState Round() { return keeper.Round(connection.get(), 1, Clock::now(), UnixMillisNow()); }
  mesh::testing::NatsConnectionPtr connection;
  LeaseKeeper keeper;
};

// The lease bucket's stream configuration as the server reports it.
rapidjson::Document BucketConfig(const mesh::testing::NatsServer& server) {
  auto bus = observers::BusConnection::Connect(mesh::testing::BusSettingsFor(server));
  REQUIRE(bus.ok());
  observers::ApiReply reply =
      (*bus)->Request({std::string("$JS.API.STREAM.INFO.KV_") + kLeaseBucket, ""});
  REQUIRE(reply.status.ok());
  rapidjson::Document doc;
  doc.Parse(reply.payload.c_str());
  INFO(reply.payload);
  REQUIRE((doc.IsObject() && doc.HasMember("config")));
  rapidjson::Document config;
  config.CopyFrom(doc["config"], config.GetAllocator());
  return config;
}

TEST_CASE("Two instances compete for the KV lease: one holds, renews, and is replaced on expiry",
          "[lease][integration][server]") {
  mesh::testing::NatsServerOptions options;
  options.users_conf = mesh::testing::ReconcilerUsersConf(LeasePublishAllow());
  auto server = mesh::testing::NatsServer::Start(options);
  constexpr milliseconds kShortTtl{1500};
  Instance a(*server, "pod-a-0000000a", kShortTtl);
  Instance b(*server, "pod-b-0000000b", kShortTtl);

  LeaseState first = a.Round();
  INFO(first.error);
  REQUIRE(first.role == LeaseRole::kHolder);
  // The bucket a created: history 1, max age = the time to live, one replica on one server.
  rapidjson::Document config = BucketConfig(*server);
  CHECK(config["max_age"].GetInt64() == kShortTtl.count() * 1'000'000);
  CHECK(config["max_msgs_per_subject"].GetInt64() == 1);
  CHECK(config["num_replicas"].GetInt() == 1);
  // Never the ownership mark: the planner leaves the bucket's stream alone.
  const std::string description =
      config.HasMember("description") ? config["description"].GetString() : "";
  CHECK(description.find("managed by") == std::string::npos);

  LeaseState second = b.Round();
  CHECK(second.role == LeaseRole::kStandby);
  CHECK(second.holder == "pod-a-0000000a");

  // a renews every third of the time to live for three times the time to live: it keeps the
  // lease throughout, and b, trying just as often, never gets it.
  Clock::time_point last_renewal = Clock::now();
  const Clock::time_point until = Clock::now() + 3 * kShortTtl;
  int rounds = 0;
  while (Clock::now() < until) {
    mesh::testing::WaitFor([&] { return Clock::now() >= last_renewal + kShortTtl / 3; });
    last_renewal = Clock::now();
    LeaseState renewed = a.Round();
    INFO(renewed.error);
    REQUIRE(renewed.role == LeaseRole::kHolder);
    CHECK(b.Round().role == LeaseRole::kStandby);
    ++rounds;
  }
  CHECK(rounds >= 6);

  // a stops renewing (as if it died): b acquires once the entry has aged out, not before.
  LeaseState taken;
  const bool acquired = mesh::testing::WaitFor(
      [&] {
        taken = b.Round();
        return taken.role == LeaseRole::kHolder;
      },
      4 * kShortTtl);
  REQUIRE(acquired);
  CHECK(Clock::now() >= last_renewal + kShortTtl);
  CHECK(taken.holder == "pod-b-0000000b");

  // a comes back: standby, naming b.
  LeaseState back = a.Round();
  CHECK(back.role == LeaseRole::kStandby);
  CHECK(back.holder == "pod-b-0000000b");
}

// A bucket made by an earlier release (a time to live of 1.5 intervals, under the request
// timeout with a short --interval) would leave a holder no room for a write (AccessForWrite): an
// instance that wants a longer time to live raises the bucket's max age, in place, never
// lowering it, and says so once.
TEST_CASE("A lease bucket with a shorter max age than the time to live is raised, never lowered",
          "[lease][integration][server]") {
  mesh::testing::NatsServerOptions options;
  options.users_conf = mesh::testing::ReconcilerUsersConf(LeasePublishAllow());
  auto server = mesh::testing::NatsServer::Start(options);
  // Both connected first: between the earlier instance's round and the other's only the
  // bucket's configuration is read, far within the earlier entry's 3 s, so that entry still
  // names its holder when the other rounds.
  constexpr milliseconds kEarlier{3000};  // the old time to live of --interval 2s
  constexpr milliseconds kWanted{8000};
  Instance earlier(*server, "pod-a-0000000a", kEarlier);
  Instance now(*server, "pod-b-0000000b", kWanted);
  LeaseState first = earlier.Round();
  INFO(first.error);
  REQUIRE(first.role == LeaseRole::kHolder);
  REQUIRE(BucketConfig(*server)["max_age"].GetInt64() == kEarlier.count() * 1'000'000);
  CHECK(earlier.keeper.TakeMaxAgeNote().empty());

  const Clock::time_point before = Clock::now();
  LeaseState second = now.Round();
  INFO(second.error);
  CHECK(second.role == LeaseRole::kStandby);  // the entry's holder is still the other
  CHECK(BucketConfig(*server)["max_age"].GetInt64() == kWanted.count() * 1'000'000);
  CHECK(now.keeper.TakeMaxAgeNote() ==
        "the lease bucket's max age is 3000 ms, 8000 ms wanted: raised");
  CHECK(now.keeper.TakeMaxAgeNote().empty());  // said once

  // The earlier instance's next round renews with the bucket's max age as it is now: it may act
  // for 3/4 of 8 s, room for a write of its 2 s request timeout.
  LeaseState renewed = earlier.Round();
  REQUIRE(renewed.role == LeaseRole::kHolder);
  CHECK(renewed.valid_until >= before + kWanted * 3 / 4);
  CHECK(AccessForWrite(renewed, Clock::now(), seconds(2)) == JetStreamAccess::kAct);
  // Never lowered, and nothing to say.
  CHECK(BucketConfig(*server)["max_age"].GetInt64() == kWanted.count() * 1'000'000);
  CHECK(earlier.keeper.TakeMaxAgeNote().empty());
  now.Round();
  CHECK(now.keeper.TakeMaxAgeNote().empty());
}

TEST_CASE("Without the extra publish permission the lease cannot be held",
          "[lease][integration][server]") {
  mesh::testing::NatsServerOptions options;
  options.users_conf = mesh::testing::ReconcilerUsersConf();  // the contract's row alone
  auto server = mesh::testing::NatsServer::Start(options);
  Instance a(*server, "pod-a-0000000a", seconds(2), milliseconds(500));
  LeaseState state = a.Round();  // the bucket is created through $JS.API; the write is refused
  CHECK(state.role == LeaseRole::kUnknown);
  CHECK_FALSE(state.error.empty());
  CHECK_FALSE(a.keeper.lease().MayAct(Clock::now()));
}

}  // namespace
}  // namespace mesh::reconciler
