// One reconcile pass: the effectful shell around the pure planner. It reads the records, the
// users file and the bus, measures the time, and calls Apply; the planner itself reads no
// clock and does no I/O.
#include "reconciler/pass.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <set>
#include <thread>

#include "model/users_file.h"
#include "observers/jetstream.h"
#include "observers/monitor.h"
#include "observers/server_version.h"
#include "observers/users_file.h"
#include "reconciler/lease_store.h"
#include "reconciler/log.h"
#include "reconciler/records_source.h"

namespace mesh::reconciler {
namespace {

using Clock = std::chrono::steady_clock;

// Recreating a stream deleted since the last observation (WaitForRemovedStores): how long to
// wait at most for the server to stop naming its old store, how often to ask, and the fixed
// settle where the server cannot tell.
constexpr auto kRemovalWait = std::chrono::seconds(5);
constexpr auto kRemovalPoll = std::chrono::milliseconds(2);
constexpr auto kRemovalSettle = std::chrono::milliseconds(200);

model::ReconcilerIdentity Identity(const Settings& settings) {
  model::ReconcilerIdentity identity;
  identity.user = UserName(settings.bus.user);
  if (!settings.bus.password.empty()) {
    identity.credential = {model::Credential::Kind::kPlain, settings.bus.password};
  }
  if (settings.lease == LeaseMode::kKv) identity.extra_publish = LeasePublishAllow();
  return identity;
}

// The users file first, then the server: a load time read after the file cannot miss a reload.
observers::ObservedState ObserveFileAndServer(const Settings& settings) {
  observers::ObservedState observed;
  if (!settings.users_file.empty()) {
    observed.users_file = observers::ObserveUsersFile(settings.users_file);
  }
  observed.server = observers::ObserveServer(settings.monitor_url, settings.bus.request_timeout);
  return observed;
}

// A server that is not ready (e.g. still recovering its store) would make every stream look
// missing, and recreating them would fight the recovery: no observation, no plan.
// After apply, the gate is not needed: nothing more is acted on, and a cluster that has just
// created replicated objects reports them "not current" on /healthz until the replicas catch up.
enum class ReadinessGate { kRequired, kNotRequired };

Status ServerReady(const observers::ObservedServer& server) {
  if (!server.monitor_configured || server.ready) return Status::Ok();
  return Status(Errc::kUnavailable, "server not ready: " + server.not_ready_reason);
}

}  // namespace

struct Reconciler::Impl {
  Impl(Settings s, observers::EventSink e) : settings(std::move(s)), events(std::move(e)) {}

  PassReport Run(uint64_t pass_id, Trigger trigger, ApplyMode mode);

  // Each step fills `report` and returns false (or an error) when the pass cannot go on.
  bool LoadRecordsFile(PassReport& report);
  bool Prepare(PassReport& report);
  bool Render(PassReport& report);
  Status Connect(uint64_t pass_id);
  // `readiness` is set to kNotReady when the gate stopped the observation.
  Result<observers::ObservedState> Observe(uint64_t pass_id, ReadinessGate gate,
                                           ServerReadiness* readiness = nullptr);
  // Before recreating a stream that the previous observation saw (deleted since), waits until
  // the server has removed the old store (docs/faults.md, "Recreation"). True when it waited:
  // the caller observes and plans again.
  bool WaitForRemovedStores(uint64_t pass_id, const observers::ObservedState& observed,
                            const PlanResult& plan);
  void RememberStreams(const observers::ObservedState& observed);
  // One lease round at `now`, logging a change of role; the new state.
  LeaseState LeaseRound(uint64_t pass_id);
  void Finish(PassReport& report, Clock::time_point started);

  Settings settings;
  observers::EventSink events;
  std::unique_ptr<observers::BusConnection> bus;
  int64_t requests_before = 0;  // bus->requests_sent() when this pass began using the bus
  std::optional<model::Records> last_valid;
  std::unique_ptr<model::BcryptHasher> hasher;  // cached across passes
  // notAfter of the certificate the bus presented, as last seen (kept across a reconnect).
  std::optional<int64_t> certificate_expiry;
  std::unique_ptr<LeaseKeeper> lease;  // with --lease
  std::set<StreamName> seen_streams;   // in the last observation
  int cluster_size = 1;                // as the last pass observed it (the lease bucket's replicas)
  // The desired state and the users file rendered from `derived_from`: kept while the records
  // stay the same, so that a pass over unchanged records neither derives nor renders again.
  std::optional<model::Records> derived_from;
  model::DesiredState desired;
  model::RenderedUsersFile rendered;
};

bool Reconciler::Impl::LoadRecordsFile(PassReport& report) {
  Result<model::ParseOutcome> loaded = LoadRecords(settings.records_path, settings.bus.user);
  if (!loaded.ok()) {
    report.records_errors.push_back("$: " + loaded.status().message());
  } else if (!loaded->ok()) {
    for (const model::ValidationError& e : loaded->errors) {
      report.records_errors.push_back(e.ToString());
    }
  } else {
    report.records_valid = true;
    if (!last_valid || !(*last_valid == loaded->records)) last_valid = std::move(loaded->records);
  }
  if (!report.records_valid) {
    Log(LogLevel::kWarn, report.pass_id, "records invalid",
        {{"errors", std::to_string(report.records_errors.size())},
         {"first", report.records_errors.front()},
         {"using_last_valid", last_valid ? "true" : "false"}});
  }
  if (!last_valid) {
    report.status =
        Status(Errc::kInvalidArgument, "no valid records yet: " + report.records_errors.front());
    return false;
  }
  return true;
}

bool Reconciler::Impl::Prepare(PassReport& report) {
  if (!LoadRecordsFile(report)) return false;
  if (!derived_from || !(*derived_from == *last_valid)) {
    derived_from.reset();
    desired = model::Derive(*last_valid, Identity(settings));
    if (!Render(report)) return false;
    derived_from = *last_valid;
  }
  report.without_credential = desired.without_credential;
  return true;
}

bool Reconciler::Impl::Render(PassReport& report) {
  rendered = {};
  if (settings.users_file.empty()) return true;
  if (settings.bus.password.empty()) {
    // Rendering without our own credential would lock the reconciler out of the bus.
    report.status = Status(Errc::kInvalidArgument,
                           "the users file is managed (--users-file) but the reconciler's "
                           "password is not set (MESH_RECONCILER_PASSWORD or --password-file)");
    return false;
  }
  if (!hasher) {
    hasher = std::make_unique<model::BcryptHasher>(settings.bus.password, settings.bcrypt_cost);
  }
  Result<model::HashedCredentials> hashes = hasher->HashAll(desired);
  if (!hashes.ok()) {
    report.status = hashes.status();
    return false;
  }
  Result<model::RenderedUsersFile> file = model::RenderUsersFile(desired, *hashes);
  if (!file.ok()) {
    report.status = file.status();
    return false;
  }
  rendered = std::move(*file);
  return true;
}

Status Reconciler::Impl::Connect(uint64_t pass_id) {
  if (bus && !bus->connected()) {
    Log(LogLevel::kInfo, pass_id, "bus connection lost; connecting again");
    bus.reset();
  }
  if (bus) return Status::Ok();
  auto connected = observers::BusConnection::Connect(settings.bus, events);
  if (!connected.ok()) return connected.status();
  bus = std::move(*connected);
  requests_before = 0;
  Log(LogLevel::kInfo, pass_id, "connected to the bus", {{"url", bus->connected_url()}});
  if (events) {
    if (Status s = bus->SubscribeAdvisories(); !s.ok()) {
      Log(LogLevel::kWarn, pass_id, "advisories not subscribed", {{"error", s.ToString()}});
    }
  }
  return Status::Ok();
}

// With a live connection, the users file and the monitoring endpoint are read on a second
// thread while JetStream is listed (the pass's wall time is then the longest of the two).
// Without one, readiness is checked before connecting, so that a server that is down costs no
// connect timeout.
Result<observers::ObservedState> Reconciler::Impl::Observe(uint64_t pass_id, ReadinessGate gate,
                                                           ServerReadiness* readiness) {
  const bool overlap = bus && bus->connected();
  std::future<observers::ObservedState> side;
  observers::ObservedState observed;
  auto check_ready = [&]() -> Status {
    Status ready = ServerReady(observed.server);
    // A server that answers but cannot yet answer for JetStream (starting, recovering, no meta
    // leader) is waited for; an unreachable one is a failure like any other.
    if (!ready.ok() && observed.server.reachable && readiness != nullptr) {
      *readiness = ServerReadiness::kNotReady;
    }
    if (ready.ok() || gate == ReadinessGate::kRequired) return ready;
    Log(LogLevel::kInfo, pass_id, "server not yet current after apply; listing anyway",
        {{"reason", ready.message()}});
    return Status::Ok();
  };
  if (overlap) {
    side = std::async(std::launch::async, ObserveFileAndServer, std::cref(settings));
  } else {
    observed = ObserveFileAndServer(settings);
    if (Status ready = check_ready(); !ready.ok()) return ready;
  }
  Status connected = Connect(pass_id);
  Result<observers::ObservedJetStream> jetstream =
      connected.ok() ? observers::ObserveJetStream(*bus)
                     : Result<observers::ObservedJetStream>(connected);
  if (overlap) {
    observed = side.get();
    if (Status ready = check_ready(); !ready.ok()) return ready;
  }
  if (!jetstream.ok()) return jetstream.status();
  observed.jetstream = std::move(*jetstream);
  return observed;
}

void Reconciler::Impl::Finish(PassReport& report, Clock::time_point started) {
  report.duration_seconds = std::chrono::duration<double>(Clock::now() - started).count();
  if (bus) {
    report.api_requests = bus->requests_sent() - requests_before;
    if (auto expiry = bus->certificate_expiry()) certificate_expiry = expiry;
  }
  if (report.readiness == ServerReadiness::kNotReady) {
    Log(LogLevel::kInfo, report.pass_id, "server not ready; waiting",
        {{"trigger", ToString(report.trigger)}, {"reason", report.status.message()}});
    return;
  }
  if (!report.status.ok()) {
    Log(LogLevel::kWarn, report.pass_id, "pass failed",
        {{"trigger", ToString(report.trigger)}, {"error", report.status.ToString()}});
    return;
  }
  int failed = 0;
  for (const ActionOutcome& o : report.outcomes) {
    const bool bad = o.outcome == Outcome::kFailed || o.outcome == Outcome::kRefused;
    failed += bad ? 1 : 0;
    Log(bad ? LogLevel::kWarn : LogLevel::kInfo, report.pass_id, "action",
        {{"action", ToString(o.action.kind)},
         {"name", o.action.name},
         {"outcome", ToString(o.outcome)},
         {"err_code", std::to_string(o.err_code)},
         {"detail", o.detail}});
  }
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.3f", report.duration_seconds);
  Log(LogLevel::kInfo, report.pass_id, "pass finished",
      {{"trigger", ToString(report.trigger)},
       {"mode", report.mode == ApplyMode::kApply ? "apply" : "observe_only"},
       {"drift", std::to_string(report.plan.drift.size())},
       {"actions", std::to_string(report.plan.actions.size())},
       {"failed", std::to_string(failed)},
       {"remaining", std::to_string(report.remaining.size())},
       {"converged", report.converged() ? "true" : "false"},
       {"api_requests", std::to_string(report.api_requests)},
       {"duration_seconds", duration}});
}

PassReport Reconciler::Impl::Run(uint64_t pass_id, Trigger trigger, ApplyMode mode) {
  const Clock::time_point started = Clock::now();
  PassReport report;
  report.pass_id = pass_id;
  report.trigger = trigger;
  report.mode = mode;
  Log(LogLevel::kDebug, pass_id, "pass started", {{"trigger", ToString(trigger)}});
  if (settings.lease == LeaseMode::kKv && !lease) {
    lease = std::make_unique<LeaseKeeper>(LeaseSettings{
        NewLeaseIdentity(), LeaseTtlFor(settings.interval), settings.bus.request_timeout});
  }
  if (lease) report.lease.role = LeaseRole::kUnknown;
  requests_before = bus ? bus->requests_sent() : 0;
  if (!Prepare(report)) {
    Finish(report, started);
    return report;
  }
  Result<observers::ObservedState> observed =
      Observe(pass_id, ReadinessGate::kRequired, &report.readiness);
  if (!observed.ok()) {
    report.status = observed.status();
    Finish(report, started);
    return report;
  }
  report.readiness = ServerReadiness::kReady;
  report.unhealthy = observed->server.unhealthy;
  const PlanOptions options{settings.prune, settings.users_file};
  if (lease) {
    cluster_size = observers::JetStreamClusterSize(*observed);
    report.lease = LeaseRound(pass_id);
  }
  report.plan = Plan(desired, rendered, *observed, options);
  if (mode == ApplyMode::kApply && WaitForRemovedStores(pass_id, *observed, report.plan)) {
    observed = Observe(pass_id, ReadinessGate::kRequired, &report.readiness);
    if (!observed.ok()) {
      report.status = observed.status();
      Finish(report, started);
      return report;
    }
    report.unhealthy = observed->server.unhealthy;
    report.plan = Plan(desired, rendered, *observed, options);
  }
  RememberStreams(*observed);
  report.remaining = report.plan.drift;
  report.remaining_problems = report.plan.problems;

  // A standby (or an instance unsure of the lease) applies only its own users file.
  std::vector<Action> allowed =
      ActionsAllowed(report.plan.actions, GateFor(report.lease, Clock::now()));
  if (mode == ApplyMode::kApply && !allowed.empty()) {
    const ApplyTargets targets{bus.get(), settings.users_file, settings.pid_file,
                               settings.monitor_url};
    report.outcomes = Apply(std::move(allowed), targets);
    Result<observers::ObservedState> after = Observe(pass_id, ReadinessGate::kNotRequired);
    if (!after.ok()) {
      report.status =
          Status(after.status().code(), "observing after apply: " + after.status().message());
    } else {
      RememberStreams(*after);
      PlanResult again = Plan(desired, rendered, *after, options);
      report.remaining = std::move(again.drift);
      report.remaining_problems = std::move(again.problems);
    }
  }
  Finish(report, started);
  return report;
}

void Reconciler::Impl::RememberStreams(const observers::ObservedState& observed) {
  seen_streams.clear();
  for (const observers::ObservedStream& s : observed.jetstream.streams) {
    seen_streams.insert(s.config.name);
  }
}

bool Reconciler::Impl::WaitForRemovedStores(uint64_t pass_id,
                                            const observers::ObservedState& observed,
                                            const PlanResult& plan) {
  std::vector<std::string> recreated;
  for (const Action& a : plan.actions) {
    if (a.kind == ActionKind::kCreateStream && a.stream && seen_streams.count(a.stream->name)) {
      recreated.push_back(a.stream->name.str());
    }
  }
  if (recreated.empty()) return false;
  const Clock::time_point begin = Clock::now();
  const observers::ObservedServer& server = observed.server;
  const auto topology = server.jetstream_cluster_size > 1 ? observers::Topology::kClustered
                                                          : observers::Topology::kStandalone;
  const bool visible =
      server.reachable &&
      observers::HealthzShowsStoresOnDisk(observers::ParseServerVersion(server.version), topology);
  std::string how;
  if (visible) {
    // The server names the old store until its folder is gone: wait for exactly that. A store
    // still named at the deadline stays, and the next plan reports it unrecoverable.
    how = "until the server no longer names the old store";
    auto named = [&](const std::vector<observers::ObjectHealth>& unhealthy) {
      return std::any_of(unhealthy.begin(), unhealthy.end(), [&](const observers::ObjectHealth& h) {
        return h.kind == observers::ObjectHealth::Kind::kStream &&
               std::find(recreated.begin(), recreated.end(), h.stream) != recreated.end();
      });
    };
    while (named(observers::ObserveUnhealthyObjects(settings.monitor_url,
                                                    settings.bus.request_timeout)) &&
           Clock::now() - begin < kRemovalWait) {
      std::this_thread::sleep_for(kRemovalPoll);
    }
  } else {
    // 2.9, clusters, no monitor: nothing tells when the old folder is gone. The server sends
    // the deletion advisory before it removes the folder, and a stream created meanwhile is
    // removed with it (acknowledged messages lost at the next restart): settle first.
    how = "a fixed settle (this server does not show stores on disk)";
    std::this_thread::sleep_for(kRemovalSettle);
  }
  std::string names;
  for (const std::string& n : recreated) names += (names.empty() ? "" : ",") + n;
  Log(LogLevel::kInfo, pass_id, "waited for deleted streams' stores to be removed",
      {{"streams", names},
       {"how", how},
       {"waited_ms",
        std::to_string(
            std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin).count())}});
  return true;
}

LeaseState Reconciler::Impl::LeaseRound(uint64_t pass_id) {
  const LeaseRole before = lease->lease().state().role;
  LeaseState state = lease->Round(bus->native_handle(), cluster_size, Clock::now());
  if (state.role != before) {
    Log(LogLevel::kInfo, pass_id, "lease",
        {{"role", ToString(state.role)}, {"holder", state.holder}, {"error", state.error}});
  }
  return state;
}

Reconciler::Reconciler(Settings settings, observers::EventSink events)
    : impl_(std::make_unique<Impl>(std::move(settings), std::move(events))) {}

Reconciler::~Reconciler() = default;

PassReport Reconciler::RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode) {
  return impl_->Run(pass_id, trigger, mode);
}

LeaseChange Reconciler::RunLeaseRound() {
  Impl& impl = *impl_;
  // Before the first pass (no keeper yet) or without a bus, the next pass runs the round.
  if (!impl.lease || !impl.bus || !impl.bus->connected()) return LeaseChange::kNone;
  const bool was_holder = impl.lease->lease().state().role == LeaseRole::kHolder;
  const LeaseState state = impl.LeaseRound(0);
  return state.role == LeaseRole::kHolder && !was_holder ? LeaseChange::kAcquired
                                                         : LeaseChange::kNone;
}

bool Reconciler::bus_connected() const {
  return impl_->bus && impl_->bus->connected();
}

std::optional<int64_t> Reconciler::bus_certificate_expiry() const {
  return impl_->certificate_expiry;
}

}  // namespace mesh::reconciler
