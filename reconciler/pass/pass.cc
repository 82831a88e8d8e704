// One reconcile pass: the effectful shell around the pure planner. It reads the records, the
// users file and the bus, measures the time, and calls Apply; the planner itself reads no
// clock and does no I/O.
#include "reconciler/pass/pass.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "model/thread_safety.h"
#include "observers/jetstream.h"
#include "reconciler/base/log.h"
#include "reconciler/pass/bus_connect.h"
#include "reconciler/pass/hash_job.h"
#include "reconciler/pass/lease_rounds.h"
#include "reconciler/pass/lease_store.h"
#include "reconciler/pass/records_source.h"
#include "reconciler/pass/recreation_wait.h"
#include "reconciler/pass/renderer.h"

namespace mesh::reconciler {
namespace {

using Clock = std::chrono::steady_clock;

// The users file first, then the server: a load time read after the file cannot miss a reload.
observers::ObservedState ObserveFileAndServer(observers::Observer& observer,
                                              const PassSettings& settings) {
  observers::ObservedState observed;
  if (!settings.users_file.empty()) observed.users_file = observer.UsersFile(settings.users_file);
  observed.server = observer.Server(settings.monitor_url, settings.bus.request_timeout);
  return observed;
}

// A server that is not ready (e.g. still recovering its store) would make every stream look
// missing, and recreating them would fight the recovery: no observation, no plan.
// After apply, the check is not needed: nothing more is acted on, and a cluster that has just
// created replicated objects reports them "not current" on /healthz until the replicas catch up.
enum class ReadinessRequirement { kRequired, kNotRequired };

Status ServerReady(const observers::ObservedServer& server) {
  if (!server.monitor_configured || server.ready) return Status::Ok();
  return Status(Errc::kUnavailable, "server not ready: " + server.not_ready_reason);
}

// The streams the mesh desires or marks, and the consumers it knows on them.
std::shared_ptr<const AdvisoryScope> ScopeOf(const model::DesiredState& desired,
                                             const observers::ObservedState& observed) {
  auto scope = std::make_shared<AdvisoryScope>();
  const std::string mark = model::OwnershipMark(desired.mesh);
  for (const model::StreamSpec& s : desired.streams) scope->streams.insert(s.name.str());
  for (const observers::ObservedStream& s : observed.jetstream.streams) {
    if (s.config.description == mark) scope->streams.insert(s.config.name.str());
  }
  for (const model::ConsumerSpec& c : desired.consumers) {
    scope->consumers.insert(c.stream.str() + "." + c.durable.str());
  }
  for (const observers::ObservedConsumer& c : observed.jetstream.consumers) {
    if (!c.config.durable.empty()) {
      scope->consumers.insert(c.config.stream.str() + "." + c.config.durable.str());
    }
  }
  return scope;
}

}  // namespace

struct Reconciler::Impl {
  Impl(PassSettings s, observers::EventSink e, std::optional<BackgroundHashing> b, PassIo i)
      : settings(std::move(s)),
        events(std::move(e)),
        io(std::move(i)),
        renderer(settings, settings.bus.password, io.observer, std::move(b)) {}

  PassReport Run(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                 const std::set<StreamName>& named);
  // Run's steps, in order.
  // The report started; the lease keeper made (with --lease), a rotated password taken.
  PassReport Begin(uint64_t pass_id, Trigger trigger, ApplyMode mode);
  // The renderer's DeriveAndRender, with the bus connected meanwhile on another thread when it
  // is not.
  bool ConnectWhileRendering(PassReport& report);
  // The whole account: observed, planned (after waiting for deleted streams' stores), applied
  // as far as this instance may, and observed again to report what remains.
  void ObservePlanApply(PassReport& report);
  PlanOptions PlanOptionsNow() const;  // the users file left out while the job hashes
  // With --lease, this pass's lease round (not for `plan`).
  void TakeLeaseRound(PassReport& report, const observers::ObservedState& observed);
  // The plan's actions less what the lease and the bus hold keep this instance from applying.
  std::vector<Action> ActionsThisInstanceMayApply(PassReport& report);
  // Fills report.remaining (the plan's drift when the observation after apply fails).
  void ApplyAndObserveAgain(PassReport& report, std::vector<Action> allowed,
                            const PlanOptions& options);

  // Each step fills `report` and returns false (or an error) when the pass cannot go on.
  bool LoadRecordsFile(PassReport& report);
  // Connects when there is no live connection (NeedsConnection), on this thread.
  Status Connect(uint64_t pass_id);
  // False when the connection is live; drops a lost one that cnats is not reconnecting.
  bool NeedsConnection(uint64_t pass_id);
  // Copies of what OpenConnection needs, with the sink that notes deletions for `recreation`.
  ConnectInputs ConnectInputsNow() const;
  // Takes what OpenConnection opened: the connection, the password it logged in with, and
  // whether it forwards deletion answers; its error otherwise.
  Status Adopt(OpenedConnection opened);
  // The server's id for `bus`'s connection; nullopt when there is none.
  std::optional<uint64_t> BusClientId() const { return bus ? bus->client_id() : std::nullopt; }
  // `readiness` is set to kNotReady when the readiness check stopped the observation.
  // `known`: consumers already known from this pass's acknowledged creations (ObserveScope).
  Result<observers::ObservedState> Observe(uint64_t pass_id,
                                           ReadinessRequirement readiness_required,
                                           ServerReadiness* readiness = nullptr,
                                           const observers::KnownConsumers* known = nullptr);
  // The named streams alone, before (or, for kRepair, instead of) the whole account: observed
  // with one info request each, planned (PlanStreams), waited for (WaitForRemovedStores) and
  // repaired, when the server is ready and this instance may act on JetStream. Fills
  // `report.repaired_first`, and `report.plan` and `outcomes` with what it found and did;
  // nothing when it could not look (the full pass, or the one after a kRepair, does it then).
  void RepairNamed(PassReport& report, const std::set<StreamName>& named);
  Result<observers::ObservedState> ObserveNamed(const std::set<StreamName>& named);
  // The named streams alone, and their consumers (ObserveNamed without the server).
  Result<observers::ObservedJetStream> ObserveNamedStreams(const std::set<StreamName>& named);
  // When the bus cannot be observed (server down or not ready, our password refused): the
  // users file is a local file we own, so it is still planned and repaired on its own, since a
  // broken one may be exactly why the server is down or refuses us.
  void RepairUsersFileAlone(PassReport& report);
  void Finish(PassReport& report, Clock::time_point started);
  // A rotated password (Reconciler::RotatePassword), at the start of a pass: it is rendered
  // from now on; the hashes the users file holds are still proven with the old key.
  void TakeRotatedPassword(uint64_t pass_id) EXCLUDES(rotation_mutex);
  // After the users-file actions of a pass (`file_outcomes`): once the server has loaded a
  // users file with the rotated password, connections use it (a new one is opened now: the
  // server closes those that logged in with the old one). True when the connection changed.
  bool ConnectWithRotatedPassword(uint64_t pass_id, const PlanResult& plan,
                                  const std::vector<ActionOutcome>& file_outcomes);
  // Apply, for a pass whose connection still uses the password before a rotation: the users
  // file first, then (on the connection ConnectWithRotatedPassword opened, when it did) the rest.
  std::vector<ActionOutcome> ApplyRotating(uint64_t pass_id, const PlanResult& plan,
                                           std::vector<Action> allowed, ApplyTargets targets);
  // Before applying `plan`: the contests found since our updates (logged once each, and kept in
  // the report), and the updates of objects backed off left out of it.
  void ReviewContests(PassReport& report, PlanResult& plan);
  // After applying: the updates that succeeded, to be watched for a change back.
  void NoteUpdates(PassReport& report, const PlanResult& plan);

  PassSettings settings;
  observers::EventSink events;
  const PassIo io;
  // settings.bus.password is what connections log in with: after a rotation it stays the old
  // one until the server has loaded a users file that holds the new one (the renderer's
  // own_password()).
  Mutex rotation_mutex;
  std::optional<std::string> rotated_password GUARDED_BY(rotation_mutex);
  RecreationWait recreation{settings};
  std::unique_ptr<observers::BusConnection> bus;
  int64_t requests_before = 0;         // bus->requests_sent() when this pass began using the bus
  int64_t lane_failures_reported = 0;  // bus->lane_failures().count as a pass last reported it
  // This pass's early connect (Run), until the first Observe takes it.
  std::optional<Status> connect_attempt;
  std::optional<model::Records> last_valid;
  uint64_t records_generation = 0;  // incremented each time last_valid changes
  std::string last_valid_digest;    // SHA-256 of the bytes last_valid was parsed from
  // notAfter of the certificate the bus presented, as last seen (kept across a reconnect).
  std::optional<int64_t> certificate_expiry;
  LeaseRounds lease_rounds{settings};  // with --lease
  Contests contests;                   // per object, across passes (fight detection)
  // The connection (and its reconnect count) the contests were seen on.
  const observers::BusConnection* contests_bus = nullptr;
  uint64_t contests_reconnects = 0;
  // Last: destroyed first, it stops the background hashing before anything else goes.
  Renderer renderer;
};

void Reconciler::Impl::ReviewContests(PassReport& report, PlanResult& plan) {
  // After a reconnect or a new connection the server may be another: restarted from a restored
  // backup, or wiped. A value found changed back then is the restore's, not another writer's,
  // and is repaired at once; what our updates were is forgotten.
  const uint64_t reconnects = bus ? bus->reconnects() : 0;
  if (bus.get() != contests_bus || reconnects != contests_reconnects) {
    contests = Contests();
    contests_bus = bus.get();
    contests_reconnects = reconnects;
  }
  ContestReview review = contests.Review(&plan, Clock::now());
  for (const ContestFound& c : review.found) {
    std::string fields;
    std::string ours;
    std::string found;
    for (const FieldDiff& f : c.fields) {
      const char* comma = fields.empty() ? "" : ", ";
      fields += comma + f.field;
      ours += comma + f.wanted;
      found += comma + f.found;
    }
    Log(LogLevel::kWarn, report.pass_id,
        "contested: another writer changed back what this reconciler updated; not updating it "
        "until the backoff ends",
        {{"kind", ToString(c.kind)},
         {"object", c.name},
         {"fields", fields},
         {"ours", ours},
         {"found", found},
         {"round", c.round},
         {"backoff_ms", c.backoff.count()}});
  }
  if (review.skipped > 0) {
    Log(LogLevel::kDebug, report.pass_id, "contested objects not updated (backed off)",
        {{"skipped", review.skipped}});
  }
  report.contests.insert(report.contests.end(), std::make_move_iterator(review.found.begin()),
                         std::make_move_iterator(review.found.end()));
  report.contested_objects = static_cast<int64_t>(contests.contested());
}

void Reconciler::Impl::NoteUpdates(PassReport& report, const PlanResult& plan) {
  // Only the updates: a first convergence's thousands of creations (each with its spec) were
  // copied here at the pass's peak, to be skipped by NoteApplied.
  std::vector<Action> done;
  for (const ActionOutcome& o : report.outcomes) {
    if (o.outcome == Outcome::kDone && IsUpdate(o.action.kind)) done.push_back(o.action);
  }
  contests.NoteApplied(plan, done, Clock::now());
  report.contested_objects = static_cast<int64_t>(contests.contested());
}

bool Reconciler::Impl::LoadRecordsFile(PassReport& report) {
  std::string digest;
  Result<std::optional<model::ParseOutcome>> loaded = LoadRecordsIfChanged(
      settings.records_path, settings.bus.user, last_valid ? last_valid_digest : "", digest);
  if (!loaded.ok()) {
    report.records_errors.push_back("$: " + loaded.status().message());
  } else if (!loaded->has_value()) {
    report.records_valid = true;  // the very bytes last_valid was parsed from
  } else if (!(*loaded)->ok()) {
    for (const model::ValidationError& e : (*loaded)->errors) {
      report.records_errors.push_back(e.ToString());
    }
  } else {
    report.records_valid = true;
    if (!last_valid || !(*last_valid == (*loaded)->records)) {
      last_valid = std::move((*loaded)->records);
      ++records_generation;
    }
    last_valid_digest = digest;
  }
  if (!report.records_valid && report.trigger != Trigger::kOnce) {  // the CLI prints the list
    Log(LogLevel::kWarn, report.pass_id, "records invalid",
        {{"errors", report.records_errors.size()},
         {"first", report.records_errors.front()},
         {"using_last_valid", last_valid.has_value()}});
  }
  if (!last_valid) {
    report.status =
        Status(Errc::kInvalidArgument, "no valid records yet: " + report.records_errors.front());
    return false;
  }
  return true;
}

namespace {

// Whether `actions` change streams or consumers (not only the users file).
bool ChangesJetStream(const std::vector<Action>& actions) {
  return std::any_of(actions.begin(), actions.end(),
                     [](const Action& a) { return KindOf(a.kind) != ObjectKind::kUsersFile; });
}

// The streams this pass created, each with the consumers it then created on it, as the server
// acknowledged them: the observation after apply takes these instead of listing the stream's
// consumers again when the stream counts exactly that many (ObserveScope::known_consumers).
// After a store wipe that is every stream: the re-listing of 636 requests on the Large mesh
// (0.16 s) becomes the stream list alone. A stream on which any consumer action did not succeed
// is left out, and listed.
observers::KnownConsumers CreatedConsumers(const std::vector<ActionOutcome>& outcomes) {
  observers::KnownConsumers known;
  for (const ActionOutcome& o : outcomes) {
    if (o.action.kind == ActionKind::kCreateStream && o.outcome == Outcome::kDone &&
        o.action.stream) {
      known[o.action.stream->name];
    }
  }
  std::set<StreamName> unsure;
  for (const ActionOutcome& o : outcomes) {
    if (KindOf(o.action.kind) != ObjectKind::kConsumer) continue;
    const StreamName& stream = ConsumerStream(o.action);
    auto it = known.find(stream);
    if (it == known.end()) continue;
    if (o.action.kind == ActionKind::kCreateConsumer && o.outcome == Outcome::kDone &&
        o.action.consumer) {
      it->second.push_back({*o.action.consumer, std::string(), std::string()});
    } else {
      unsure.insert(stream);
    }
  }
  for (const StreamName& stream : unsure) known.erase(stream);
  return known;
}

// Every object the server reports it cannot answer for: what /healthz names, then what a
// clustered list names in "missing" (observers::UndescribedObject), foreign ones included.
std::vector<observers::ObjectHealth> UnhealthyOf(const observers::ObservedState& observed) {
  std::vector<observers::ObjectHealth> all = observed.server.unhealthy;
  for (const observers::UndescribedObject& u : observed.jetstream.undescribed) {
    observers::ObjectHealth h;
    h.kind = u.consumer.empty() ? observers::ObjectHealth::Kind::kStream
                                : observers::ObjectHealth::Kind::kConsumer;
    h.stream = u.stream.str();
    h.consumer = u.consumer.str();
    h.error = (u.consumer.empty() ? "stream " + u.stream.str()
                                  : "consumer " + u.stream.str() + " > " + u.consumer.str()) +
              ": " + u.reason;
    all.push_back(std::move(h));
  }
  return all;
}

}  // namespace

bool Reconciler::Impl::NeedsConnection(uint64_t pass_id) {
  if (bus && !bus->connected()) {
    Log(LogLevel::kInfo, pass_id, "bus connection lost; connecting again");
    // A connection cnats is still reconnecting is kept until a new one succeeds: its
    // kReconnected wakes a pass the moment the server is back, and dropping it for a connect
    // that fails would leave the repair to wait for the retry backoff.
    if (!bus->reconnecting()) bus.reset();
  }
  return !(bus && bus->connected());
}

ConnectInputs Reconciler::Impl::ConnectInputsNow() const {
  ConnectInputs inputs{settings.bus, renderer.own_password(), nullptr};
  if (events) {
    inputs.events = [forward = events, deletions = recreation.deletions()](
                        observers::BusEvent event, const std::string& subject) {
      if (event == observers::BusEvent::kAdvisory) {
        if (std::optional<DeletionAdvisory> deletion = DeletionNamed(subject)) {
          deletions->Note(*deletion, Clock::now());
        }
      } else if (event == observers::BusEvent::kStreamDeletionAnswered) {
        deletions->NoteAnswered(subject, Clock::now());
      }
      forward(event, subject);
    };
  }
  return inputs;
}

Status Reconciler::Impl::Adopt(OpenedConnection opened) {
  if (!opened.status.ok()) return opened.status;
  // the renderer forgets its previous key in Finish, not here
  if (opened.rotated_to) settings.bus.password = std::move(*opened.rotated_to);
  bus = std::move(opened.bus);
  requests_before = 0;
  lane_failures_reported = 0;
  recreation.ForgetAccount();
  recreation.SetDeletionAnswers(opened.answers);
  return Status::Ok();
}

Status Reconciler::Impl::Connect(uint64_t pass_id) {
  if (!NeedsConnection(pass_id)) return Status::Ok();
  return Adopt(io.open(pass_id, ConnectInputsNow()));
}

// With a live connection, the users file and the monitoring endpoint are read on a second
// thread while JetStream is listed (the pass's wall time is then the longest of the two).
// Without one (Run's early attempt failed, or a later Observe found it lost), readiness is
// checked before connecting, so that a server that is down or not yet ready is reported as
// such rather than as the failed connect.
Result<observers::ObservedState> Reconciler::Impl::Observe(uint64_t pass_id,
                                                           ReadinessRequirement readiness_required,
                                                           ServerReadiness* readiness,
                                                           const observers::KnownConsumers* known) {
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
    if (ready.ok() || readiness_required == ReadinessRequirement::kRequired) return ready;
    Log(LogLevel::kInfo, pass_id, "server not yet current after apply; listing anyway",
        {{"reason", ready.message()}});
    return Status::Ok();
  };
  if (overlap) {
    side = std::async(std::launch::async, ObserveFileAndServer, std::ref(*io.observer),
                      std::cref(settings));
  } else {
    observed = ObserveFileAndServer(*io.observer, settings);
    if (Status ready = check_ready(); !ready.ok()) return ready;
  }
  // A connection this pass already tried (Run) is not tried again: a refused password would
  // otherwise be refused twice, and logged twice by the server.
  Status connected =
      connect_attempt ? *std::exchange(connect_attempt, std::nullopt) : Connect(pass_id);
  observers::ObserveScope scope{model::OwnershipMark(renderer.desired().mesh)};
  scope.known_consumers = known;
  scope.desired = &renderer.desired();  // what is as desired keeps no raw config
  Result<observers::ObservedJetStream> jetstream =
      connected.ok() ? io.observer->Account(bus.get(), scope)
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
  report.finished_unix_ms = UnixMillisNow();
  // No rotation under way (or the server has loaded it): the old key proves nothing more.
  if (settings.bus.password == renderer.own_password()) renderer.ForgetPreviousKey();
  // Until the hashes are done the users file lacks (or cannot prove) those credentials, so the
  // pass is not converged, and says why; the hashing's end wakes the pass that writes it.
  if (report.credentials_pending > 0) {
    report.remaining_problems.push_back(
        std::to_string(report.credentials_pending) +
        " password(s) still being hashed: the users file is compared and written when they "
        "are done");
  }
  if (bus) {
    report.api_requests = bus->requests_sent() - requests_before;
    if (auto expiry = bus->certificate_expiry()) certificate_expiry = expiry;
    // Lanes that failed to open since the last report (an attempt may end after the pass that
    // started it): the large applies meanwhile went on the connections open, which is slower
    // but not wrong, so a warning and a counter rather than a failed pass.
    const observers::BusConnection::LaneFailures lanes = bus->lane_failures();
    report.lane_open_failures = lanes.count - lane_failures_reported;
    lane_failures_reported = lanes.count;
    if (report.lane_open_failures > 0) {
      Log(LogLevel::kWarn, report.pass_id,
          "lanes could not be opened; large applies use the connections open",
          {{"lanes_failed", report.lane_open_failures}, {"error", lanes.last_error}});
    }
  }
  // Every outcome is logged, also those of a pass that fails after apply (the server lost while
  // observing again): what it did must not exist only as counters.
  int failed = 0;
  for (const ActionOutcome& o : report.outcomes) {
    const bool bad = o.outcome == Outcome::kFailed || o.outcome == Outcome::kRefused;
    failed += bad ? 1 : 0;
    Log(bad ? LogLevel::kWarn : LogLevel::kInfo, report.pass_id, "action",
        {{"action", ToString(o.action.kind)},
         {"name", o.action.name},
         {"outcome", ToString(o.outcome)},
         {"err_code", o.err_code},
         {"detail", o.detail}});
  }
  if (report.readiness == ServerReadiness::kNotReady) {
    Log(LogLevel::kInfo, report.pass_id, "server not ready; waiting",
        {{"trigger", ToString(report.trigger)}, {"reason", report.status.message()}});
    return;
  }
  // The CLI's one pass (plan, reconcile --once) prints its report, which says the error: the
  // log line would say it a second time on the same terminal.
  if (!report.status.ok() && report.trigger == Trigger::kOnce) return;
  if (!report.status.ok()) {
    Log(LogLevel::kWarn, report.pass_id, "pass failed",
        {{"trigger", ToString(report.trigger)},
         {"error", report.status.ToString()},
         {"applied", report.outcomes.size()},
         {"failed", failed}});
    return;
  }
  Log(LogLevel::kInfo, report.pass_id, "pass finished",
      {{"trigger", ToString(report.trigger)},
       {"mode", kApplyModeNames.Name(report.mode)},
       {"drift", report.plan.drift.size()},
       {"actions", report.plan.actions.size()},
       {"failed", failed},
       {"remaining", report.remaining.size()},
       {"converged", report.converged()},
       {"api_requests", report.api_requests},
       {"passwords_hashed", report.passwords_hashed},
       {"credentials_pending", report.credentials_pending},
       {"duration_seconds", std::round(report.duration_seconds * 1000) / 1000}});
}

namespace {

// What RepairNamed found and did, set aside while the whole account is observed and planned,
// then put first in the report.
struct RepairedFirst {
  PlanResult plan;
  std::vector<ActionOutcome> outcomes;
};

RepairedFirst SetAsideRepairedFirst(PassReport& report) {
  RepairedFirst first{std::move(report.plan), std::move(report.outcomes)};
  report.plan = {};
  report.outcomes = {};
  return first;
}

void PutRepairedFirst(PassReport& report, RepairedFirst first) {
  if (report.repaired_first.empty()) return;
  first.plan.drift.insert(first.plan.drift.end(),
                          std::make_move_iterator(report.plan.drift.begin()),
                          std::make_move_iterator(report.plan.drift.end()));
  first.plan.actions.insert(first.plan.actions.end(),
                            std::make_move_iterator(report.plan.actions.begin()),
                            std::make_move_iterator(report.plan.actions.end()));
  first.plan.problems.insert(first.plan.problems.end(), report.plan.problems.begin(),
                             report.plan.problems.end());
  report.plan = std::move(first.plan);
  first.outcomes.insert(first.outcomes.end(), std::make_move_iterator(report.outcomes.begin()),
                        std::make_move_iterator(report.outcomes.end()));
  report.outcomes = std::move(first.outcomes);
}

}  // namespace

// A pass as a list of steps; each fills `report`, and the pass ends where one cannot go on.
PassReport Reconciler::Impl::Run(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                                 const std::set<StreamName>& named) {
  const Clock::time_point started = Clock::now();
  PassReport report = Begin(pass_id, trigger, mode);
  if (LoadRecordsFile(report) && ConnectWhileRendering(report)) {
    if (mode == ApplyMode::kApply && !named.empty()) RepairNamed(report, named);
    if (trigger != Trigger::kRepair) {
      RepairedFirst first = SetAsideRepairedFirst(report);
      ObservePlanApply(report);
      PutRepairedFirst(report, std::move(first));
    }
  }
  Finish(report, started);
  return report;
}

PassReport Reconciler::Impl::Begin(uint64_t pass_id, Trigger trigger, ApplyMode mode) {
  PassReport report;
  report.pass_id = pass_id;
  report.trigger = trigger;
  report.mode = mode;
  Log(LogLevel::kDebug, pass_id, "pass started", {{"trigger", ToString(trigger)}});
  lease_rounds.Start();
  if (lease_rounds.active()) report.lease.role = LeaseRole::kUnknown;
  TakeRotatedPassword(pass_id);
  requests_before = bus ? bus->requests_sent() : 0;
  return report;
}

bool Reconciler::Impl::ConnectWhileRendering(PassReport& report) {
  // A new connection costs the server one bcrypt of our password (at the users file's cost),
  // and rendering costs us one more (the hasher's key) plus the file's proof: one after the
  // other, every process paid both before its first request. So the connection is opened while
  // the records are derived and rendered, on copies (OpenConnection), and adopted after; Observe
  // takes this attempt rather than making one of its own.
  std::future<OpenedConnection> opening;
  connect_attempt.reset();
  if (NeedsConnection(report.pass_id)) {
    // io.open (OpenConnection) takes its inputs by value and cannot reach this object
    // (bus_connect.h).
    opening = std::async(std::launch::async, io.open, report.pass_id, ConnectInputsNow());
  }
  const bool derived = renderer.DeriveAndRender(report, *last_valid, records_generation);
  if (opening.valid()) connect_attempt = Adopt(opening.get());  // Observe's to report
  return derived;
}

void Reconciler::Impl::ObservePlanApply(PassReport& report) {
  const uint64_t pass_id = report.pass_id;
  const ApplyMode mode = report.mode;
  Clock::time_point observation_began = Clock::now();
  Result<observers::ObservedState> observed =
      Observe(pass_id, ReadinessRequirement::kRequired, &report.readiness);
  if (!observed.ok()) {
    report.status = observed.status();
    if (mode == ApplyMode::kApply) RepairUsersFileAlone(report);
    return;
  }
  report.readiness = ServerReadiness::kReady;
  report.server_version = observed->server.version;
  report.unhealthy = UnhealthyOf(*observed);
  report.advisory_scope = ScopeOf(renderer.desired(), *observed);
  recreation.deletions()->SetScope(report.advisory_scope);
  if (!settings.users_file.empty()) {
    report.users_file_check = renderer.state() == RenderingState::kPending
                                  ? UsersFileCheck::kLeftAlone
                                  : UsersFileCheck::kCompared;
  }
  const PlanOptions options = PlanOptionsNow();
  TakeLeaseRound(report, *observed);
  report.plan = Plan(renderer.desired(), renderer.rendered(), *observed, options);
  renderer.NoteUnhashed(report);
  if (mode == ApplyMode::kApply &&
      recreation.WaitForRemovedStores(pass_id, *observed, report.plan, BusClientId())) {
    observation_began = Clock::now();
    observed = Observe(pass_id, ReadinessRequirement::kRequired, &report.readiness);
    if (!observed.ok()) {
      report.status = observed.status();
      return;
    }
    report.unhealthy = UnhealthyOf(*observed);
    report.plan = Plan(renderer.desired(), renderer.rendered(), *observed, options);
  }
  recreation.RememberStreams(*observed, observation_began);
  if (mode == ApplyMode::kApply) ReviewContests(report, report.plan);
  std::vector<Action> allowed;
  if (mode == ApplyMode::kApply) allowed = ActionsThisInstanceMayApply(report);
  if (allowed.empty()) {  // nothing applied: what remains is what was planned
    report.remaining = report.plan.drift;
    report.remaining_problems = report.plan.problems;
    return;
  }
  // Planned: the observation is not read again, and the one after apply is made while
  // ApplyAndObserveAgain runs, so this one is let go first (at ten times the Large mesh, each
  // holds about 11 MiB).
  *observed = observers::ObservedState();
  ApplyAndObserveAgain(report, std::move(allowed), options);
}

PlanOptions Reconciler::Impl::PlanOptionsNow() const {
  // While the job hashes, the users file is left alone (it is neither observed as drift nor
  // written); streams and consumers are repaired at once. The users file is ours: owned by the
  // uid we run as (a rewrite makes it so).
  return PlanOptions{
      settings.prune,
      renderer.state() == RenderingState::kPending ? std::string() : settings.users_file,
      static_cast<int64_t>(geteuid())};
}

void Reconciler::Impl::TakeLeaseRound(PassReport& report,
                                      const observers::ObservedState& observed) {
  if (!lease_rounds.active()) return;
  // `plan` (the CLI's observe-only pass) never takes, renews or writes the lease: run inside a
  // pod beside the daemon, it must not move the lease away from (or onto) anyone.
  if (report.trigger == Trigger::kOnce && report.mode == ApplyMode::kObserveOnly) {
    report.lease.error = "plan does not take the lease";
    return;
  }
  lease_rounds.set_cluster_size(observers::JetStreamClusterSize(observed));
  report.lease = lease_rounds.Round(report.pass_id, bus->native_handle());
}

std::vector<Action> Reconciler::Impl::ActionsThisInstanceMayApply(PassReport& report) {
  // A standby (or an instance unsure of the lease) applies only its own users file; under a
  // bus hold nothing is applied, and with the hold unknown, only the users file.
  std::vector<Action> allowed =
      ActionsAllowed(report.plan.actions, AccessFor(report.lease, Clock::now()));
  if (!lease_rounds.active() || allowed.empty()) return allowed;
  const LeaseRounds::HoldVerdict verdict =
      lease_rounds.CheckBusHold(report.pass_id, bus->native_handle(), report);
  if (verdict == LeaseRounds::HoldVerdict::kHeld) allowed.clear();
  if (verdict == LeaseRounds::HoldVerdict::kUnknown) {
    allowed = ActionsAllowed(std::move(allowed), JetStreamAccess::kUsersFileOnly);
  }
  return allowed;
}

void Reconciler::Impl::ApplyAndObserveAgain(PassReport& report, std::vector<Action> allowed,
                                            const PlanOptions& options) {
  const uint64_t pass_id = report.pass_id;
  ApplyTargets targets;
  targets.bus = bus.get();
  targets.users_file_path = settings.users_file;
  targets.pid_file = settings.pid_file;
  targets.monitor_url = settings.monitor_url;
  if (lease_rounds.active()) {
    targets.before_chunk = [this, pass_id] { return lease_rounds.Fence(pass_id, bus.get()); };
  }
  std::optional<HashingPauseHold> holding;
  if (ChangesJetStream(allowed)) holding.emplace(renderer.hashing_pause());
  report.outcomes = settings.bus.password == renderer.own_password()
                        ? Apply(std::move(allowed), targets)
                        : ApplyRotating(pass_id, report.plan, std::move(allowed), targets);
  holding.reset();
  NoteUpdates(report, report.plan);
  const observers::KnownConsumers known = CreatedConsumers(report.outcomes);
  const Clock::time_point after_began = Clock::now();
  Result<observers::ObservedState> after =
      Observe(pass_id, ReadinessRequirement::kNotRequired, nullptr, &known);
  if (!after.ok()) {
    report.status =
        Status(after.status().code(), "observing after apply: " + after.status().message());
    report.remaining = report.plan.drift;  // as far as this pass knows
    report.remaining_problems = report.plan.problems;
    return;
  }
  recreation.RememberStreams(*after, after_began);
  PlanResult again = Plan(renderer.desired(), renderer.rendered(), *after, options);
  contests.Annotate(&again.drift, Clock::now());
  report.remaining = std::move(again.drift);
  report.remaining_problems = std::move(again.problems);
}

namespace {

// The users-file part of a plan: its drift entries and actions only.
PlanResult UsersFilePart(PlanResult plan) {
  PlanResult part;
  for (DriftEntry& entry : plan.drift) {
    if (entry.kind == ObjectKind::kUsersFile) part.drift.push_back(std::move(entry));
  }
  for (Action& action : plan.actions) {
    if (KindOf(action.kind) == ObjectKind::kUsersFile) part.actions.push_back(std::move(action));
  }
  return part;
}

}  // namespace

void Reconciler::Impl::RepairUsersFileAlone(PassReport& report) {
  if (settings.users_file.empty() || renderer.rendered().bytes.empty()) return;
  // Nothing of the server is known: no reload is planned for a file already as rendered (the
  // next pass that reaches the server checks that it loaded it).
  const PlanOptions options{settings.prune, settings.users_file, static_cast<int64_t>(geteuid())};
  auto plan_file = [&] {
    observers::ObservedState observed;
    observed.users_file = io.observer->UsersFile(settings.users_file);
    return UsersFilePart(Plan(renderer.desired(), renderer.rendered(), observed, options));
  };
  report.plan = plan_file();
  report.remaining = report.plan.drift;
  if (report.plan.actions.empty()) return;
  Log(LogLevel::kInfo, report.pass_id, "the bus cannot be observed; repairing the users file",
      {{"reason", report.status.message()}});
  ApplyTargets targets;  // no bus: only the users-file actions are applied
  targets.users_file_path = settings.users_file;
  targets.pid_file = settings.pid_file;
  targets.monitor_url = settings.monitor_url;
  report.outcomes = Apply(report.plan.actions, targets);  // Finish logs each outcome
  report.remaining = plan_file().drift;
}

Result<observers::ObservedState> Reconciler::Impl::ObserveNamed(const std::set<StreamName>& named) {
  // The server only: the users file is not part of the named streams' plan.
  observers::ObservedState observed;
  observed.server = io.observer->Server(settings.monitor_url, settings.bus.request_timeout);
  if (Status ready = ServerReady(observed.server); !ready.ok()) return ready;
  Result<observers::ObservedJetStream> jetstream = ObserveNamedStreams(named);
  if (!jetstream.ok()) return jetstream.status();
  observed.jetstream = std::move(*jetstream);
  return observed;
}

Result<observers::ObservedJetStream> Reconciler::Impl::ObserveNamedStreams(
    const std::set<StreamName>& named) {
  observers::ObserveScope scope{model::OwnershipMark(renderer.desired().mesh)};
  scope.desired = &renderer.desired();
  return io.observer->Streams(bus.get(), named, scope);
}

void Reconciler::Impl::RepairNamed(PassReport& report, const std::set<StreamName>& named) {
  const Clock::time_point begin = Clock::now();
  // Only an instance that may act on JetStream now: the holder (as its last round saw it) or
  // one without a lease. Anyone else leaves it to the full pass, which runs the lease round.
  if (lease_rounds.active() &&
      AccessFor(lease_rounds.keeper().state(), Clock::now()) != JetStreamAccess::kAct) {
    return;
  }
  const uint64_t pass_id = report.pass_id;
  const PlanOptions options{settings.prune, std::string(), static_cast<int64_t>(geteuid())};
  Result<observers::ObservedState> observed = ObserveNamed(named);
  if (!observed.ok()) {
    Log(LogLevel::kDebug, pass_id, "named streams not repaired first",
        {{"reason", observed.status().message()}});
    return;
  }
  PlanResult plan = PlanStreams(renderer.desired(), *observed, named, options);
  if (std::optional<RemovalWaited> waited =
          recreation.WaitForRemovedStores(pass_id, *observed, plan, BusClientId())) {
    // The server was read just before the wait, and the wait read what it needed: the streams
    // alone are read again (the whole server took some 14 ms on a 2.10 bus of 6,000 streams),
    // with the unhealthy objects as the wait read them last.
    Result<observers::ObservedJetStream> streams = ObserveNamedStreams(named);
    if (!streams.ok()) return;
    observed->jetstream = std::move(*streams);
    if (waited->unhealthy) observed->server.unhealthy = std::move(*waited->unhealthy);
    plan = PlanStreams(renderer.desired(), *observed, named, options);
  }
  report.repaired_first.assign(named.begin(), named.end());
  // An advisory names a stream another writer updated: when it is contested, its repair waits
  // for the backoff like any other pass's, so the two writers' advisories stop waking each
  // other's updates.
  ReviewContests(report, plan);
  std::vector<Action> actions = plan.actions;
  if (!actions.empty() && lease_rounds.active() &&
      lease_rounds.CheckBusHold(pass_id, bus->native_handle(), report) !=
          LeaseRounds::HoldVerdict::kAct) {
    actions.clear();
  }
  if (!actions.empty()) {
    ApplyTargets targets;
    targets.bus = bus.get();
    if (lease_rounds.active()) {
      targets.before_chunk = [this, pass_id] { return lease_rounds.Fence(pass_id, bus.get()); };
    }
    const HashingPauseHold holding(renderer.hashing_pause());  // only streams and consumers here
    report.outcomes = Apply(std::move(actions), targets);
    NoteUpdates(report, plan);
  }
  std::string names;
  for (const StreamName& n : named) names += (names.empty() ? "" : ",") + n.str();
  Log(LogLevel::kInfo, pass_id, "named streams repaired first",
      {{"streams", names},
       {"drift", plan.drift.size()},
       {"actions", plan.actions.size()},
       {"duration_ms",
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin).count()}});
  if (report.trigger == Trigger::kRepair) {
    // No full observation follows: what remains of these streams is seen again here.
    report.remaining = plan.drift;
    report.remaining_problems = plan.problems;
    if (!report.outcomes.empty()) {
      if (Result<observers::ObservedState> after = ObserveNamed(named); after.ok()) {
        PlanResult again = PlanStreams(renderer.desired(), *after, named, options);
        contests.Annotate(&again.drift, Clock::now());
        report.remaining = std::move(again.drift);
        report.remaining_problems = std::move(again.problems);
      }
    }
  }
  report.plan = std::move(plan);
}

void Reconciler::Impl::TakeRotatedPassword(uint64_t pass_id) {
  std::optional<std::string> rotated;
  {
    MutexLock lock(rotation_mutex);
    rotated = std::exchange(rotated_password, std::nullopt);
  }
  if (!rotated || !renderer.Rotate(std::move(*rotated))) return;
  if (settings.users_file.empty()) {
    // Not managed here: whoever keeps the server's users has the new password too.
    settings.bus.password = renderer.own_password();
    bus.reset();
    Log(LogLevel::kInfo, pass_id, "password rotated: connecting with the new one");
    return;
  }
  Log(LogLevel::kInfo, pass_id,
      "password rotated: rendered into the users file; the connection keeps the old one until "
      "the server has loaded it");
}

bool Reconciler::Impl::ConnectWithRotatedPassword(uint64_t pass_id, const PlanResult& plan,
                                                  const std::vector<ActionOutcome>& file_outcomes) {
  if (settings.bus.password == renderer.own_password()) return false;
  // The server holds our new entry when the rendering has it (not while it is being hashed),
  // and either the file needed nothing or it was written and the reload confirmed.
  if (renderer.state() == RenderingState::kPending) return false;
  const bool file_drift =
      std::any_of(plan.drift.begin(), plan.drift.end(),
                  [](const DriftEntry& e) { return e.kind == ObjectKind::kUsersFile; });
  const bool all_done =
      std::all_of(file_outcomes.begin(), file_outcomes.end(),
                  [](const ActionOutcome& o) { return o.outcome == Outcome::kDone; });
  if (file_drift && (file_outcomes.empty() || !all_done)) return false;
  settings.bus.password = renderer.own_password();
  // The server closes the old connection on the reload (its password is no longer valid);
  // a new one, with the new password, serves the rest of this pass.
  bus.reset();
  const Status connected = Connect(pass_id);
  Log(connected.ok() ? LogLevel::kInfo : LogLevel::kWarn, pass_id,
      "the server loaded the rotated password: connecting with it",
      {{"error", connected.ok() ? std::string() : connected.ToString()}});
  return true;
}

std::vector<ActionOutcome> Reconciler::Impl::ApplyRotating(uint64_t pass_id, const PlanResult& plan,
                                                           std::vector<Action> allowed,
                                                           ApplyTargets targets) {
  std::vector<Action> file_actions;
  std::vector<Action> rest;
  for (Action& a : allowed) {
    (KindOf(a.kind) == ObjectKind::kUsersFile ? file_actions : rest).push_back(std::move(a));
  }
  std::vector<ActionOutcome> outcomes = Apply(std::move(file_actions), targets);
  if (ConnectWithRotatedPassword(pass_id, plan, outcomes)) targets.bus = bus.get();
  if (!rest.empty()) {
    std::vector<ActionOutcome> more = Apply(std::move(rest), targets);
    outcomes.insert(outcomes.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  return outcomes;
}

model::ReconcilerIdentity OwnIdentity(const PassSettings& settings) {
  model::ReconcilerIdentity identity;
  identity.user = UserName(settings.bus.user);
  if (!settings.bus.password.empty()) {
    identity.credential = {model::Credential::Kind::kPlain, settings.bus.password};
  }
  if (settings.lease == LeaseMode::kKv) identity.extra_publish = LeasePublishAllow();
  return identity;
}

Reconciler::Reconciler(PassSettings settings, observers::EventSink events,
                       std::optional<BackgroundHashing> background, PassIo io)
    : impl_(std::make_unique<Impl>(std::move(settings), std::move(events), std::move(background),
                                   std::move(io))) {}

Reconciler::~Reconciler() = default;

PassReport Reconciler::RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                               const std::set<StreamName>& named) {
  return impl_->Run(pass_id, trigger, mode, named);
}

void Reconciler::RotatePassword(std::string password) {
  MutexLock lock(impl_->rotation_mutex);
  impl_->rotated_password = std::move(password);
}

HashingStop Reconciler::StopHashing(std::chrono::milliseconds wait) {
  return impl_->renderer.StopHashJobWithin(wait);
}

LeaseChange Reconciler::RunLeaseRound() {
  return impl_->lease_rounds.RoundBetweenPasses(impl_->bus.get());
}

Status Reconciler::WriteBusHold(BusHold hold) {
  Impl& impl = *impl_;
  if (!impl.lease_rounds.active()) {
    return Status(Errc::kUnavailable, "a hold for the bus needs --lease");
  }
  if (!impl.bus || !impl.bus->connected()) {
    return Status(Errc::kUnavailable, "not connected to the bus");
  }
  return impl.lease_rounds.WriteBusHold(impl.bus->native_handle(), std::move(hold));
}

Status Reconciler::DeleteBusHold() {
  Impl& impl = *impl_;
  if (!impl.lease_rounds.active()) {
    return Status(Errc::kUnavailable, "a hold for the bus needs --lease");
  }
  if (!impl.bus || !impl.bus->connected()) {
    return Status(Errc::kUnavailable, "not connected to the bus");
  }
  return impl.lease_rounds.DeleteBusHold(impl.bus->native_handle());
}

BusHoldView Reconciler::bus_hold() const {
  if (!impl_->lease_rounds.active()) return {};
  return impl_->lease_rounds.keeper().bus_hold();
}

void Reconciler::ReleaseLease() {
  impl_->lease_rounds.Release(impl_->bus.get());
}

LeaseState Reconciler::lease_state() const {
  if (!impl_->lease_rounds.active()) return LeaseState{};
  return impl_->lease_rounds.keeper().state();
}

bool Reconciler::bus_connected() const {
  // A server that stopped answering is not a bus one is connected to
  // (mesh_reconciler_bus_connected).
  return impl_->bus && impl_->bus->connected() && impl_->bus->answering();
}

std::optional<int64_t> Reconciler::bus_certificate_expiry() const {
  return impl_->certificate_expiry;
}

}  // namespace mesh::reconciler
