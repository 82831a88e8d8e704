#include "reconciler/daemon/loop.h"

#include <algorithm>
#include <array>
#include <exception>

#include "model/thread_safety.h"
#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

constexpr double kBackoffJitter = 0.2;

uint32_t Bit(Trigger trigger) {
  return 1u << static_cast<unsigned>(trigger);
}

// When several wake-ups are served by one pass, the pass carries the first of these.
constexpr std::array kTriggerPriority = {
    Trigger::kStart,          Trigger::kForced,
    Trigger::kRecordsChanged, Trigger::kUsersFileChanged,
    Trigger::kLeaseAcquired,  Trigger::kAdvisory,
    Trigger::kReconnect,      Trigger::kRetry,
    Trigger::kPeriodic,
};

double UnixSecondsNow() {
  return static_cast<double>(UnixMillisNow()) / 1000.0;
}

// Runs `body` at the loop's boundary: an exception there is a bug. It is logged ("<what> threw
// an exception (a bug); the loop carries on") and counted, and `on_bug(error)` is the result.
template <typename Body, typename OnBug>
auto CatchingBugs(Metrics* metrics, uint64_t pass_id, const char* what, Body body, OnBug on_bug) {
  auto failed = [&](const std::string& error) {
    Log(LogLevel::kError, pass_id,
        std::string(what) + " threw an exception (a bug); the loop carries on", {{"error", error}});
    if (metrics != nullptr) metrics->RecordException();
    return on_bug(error);
  };
  try {
    return body();
  } catch (const std::exception& e) {
    return failed(e.what());
  } catch (...) {
    return failed("unknown exception");
  }
}

// The pass, with any exception caught at this boundary.
struct GuardedPass {
  PassReport report;
  bool threw = false;
};

GuardedPass RunGuarded(PassRunner& runner, Metrics* metrics, uint64_t pass_id, Trigger trigger,
                       ApplyMode mode, const std::set<StreamName>& named) {
  const auto start = std::chrono::steady_clock::now();
  return CatchingBugs(
      metrics, pass_id, "pass",
      [&] { return GuardedPass{runner.RunPass(pass_id, trigger, mode, named)}; },
      [&](const std::string& error) {
        GuardedPass guarded;
        guarded.threw = true;
        guarded.report.status = Status(Errc::kInternal, "the pass threw: " + error);
        guarded.report.duration_seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return guarded;
      });
}

LeaseChange RunLeaseRoundGuarded(PassRunner& runner, Metrics* metrics) {
  return CatchingBugs(
      metrics, 0, "lease round", [&] { return runner.RunLeaseRound(); },
      [](const std::string&) { return LeaseChange::kNone; });
}

void ReleaseLeaseGuarded(PassRunner& runner, Metrics* metrics) {
  CatchingBugs(
      metrics, 0, "lease release",
      [&] {
        runner.ReleaseLease();
        return 0;
      },
      [](const std::string&) { return 0; });
}

// mesh_reconciler_lease_holder follows the lease as this instance last saw it: after a round
// between passes (acquired, lost) and a release too, not only after a pass.
void UpdateLeaseHolder(PassRunner& runner, Metrics* metrics) {
  if (metrics == nullptr) return;
  const std::optional<LeaseState> state = CatchingBugs(
      metrics, 0, "lease state", [&] { return runner.lease_state(); },
      [](const std::string&) { return std::optional<LeaseState>(); });
  if (state) metrics->SetLeaseHolder(MayAct(*state, LeaseClock::now()));
}

}  // namespace

Loop::Loop(LoopOptions options, Metrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      rng_(options_.seed != 0 ? options_.seed : std::random_device()()) {}

Loop::~Loop() {
  {
    MutexLock lock(mutex_);
    stopping_ = true;
  }
  wake_cv_.notify_all();
  done_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Loop::Start(PassRunner& runner) {
  MutexLock lock(mutex_);
  const auto now = Clock::now();
  pending_ |= Bit(Trigger::kStart);
  next_periodic_ = now + JitteredLocked(options_.interval, options_.interval_jitter);
  next_lease_round_ = now + options_.lease_round;
  heartbeat_ = now;
  thread_ = std::thread([this, &runner] { Run(runner); });
}

bool Loop::Stop(std::chrono::milliseconds grace) {
  MutexLock lock(mutex_);
  stopping_ = true;
  wake_cv_.notify_all();
  done_cv_.notify_all();
  if (!thread_.joinable()) return true;
  if (!done_cv_.wait_for(lock.native(), grace, [&]() REQUIRES(mutex_) { return exited_; }))
    return false;
  lock.Unlock();
  thread_.join();
  return true;
}

void Loop::Wake(Trigger trigger) {
  {
    MutexLock lock(mutex_);
    pending_ |= Bit(trigger);
  }
  wake_cv_.notify_all();
}

void Loop::OnBusEvent(observers::BusEvent event, std::string_view subject) {
  switch (event) {
    case observers::BusEvent::kAdvisory: {
      std::shared_ptr<const AdvisoryScope> scope;
      {
        MutexLock lock(mutex_);
        scope = advisory_scope_;
      }
      if (AdvisoryWakes(subject, scope.get())) {
        if (std::optional<std::string> target = RepairTarget(subject, scope.get())) {
          if (NameForRepair(StreamName(std::move(*target)))) return;
        }
        Wake(Trigger::kAdvisory);
      } else {
        MutexLock lock(mutex_);
        ++advisories_ignored_;
      }
      return;
    }
    case observers::BusEvent::kStreamDeletionAnswered:
      return;  // the recreation wait's (RecreationWait): a deletion's advisories woke the pass
    case observers::BusEvent::kReconnected: {
      {
        MutexLock lock(mutex_);
        bus_connected_ = true;
        // The server is back: what the backoff was waiting for has happened. The pass woken
        // below runs at once, and should it fail (the server still starting), its retry
        // starts over from backoff_initial instead of waiting out the outage's backoff.
        consecutive_failures_ = 0;
        retry_at_.reset();
      }
      if (metrics_ != nullptr) metrics_->SetBusConnected(true);
      Log(LogLevel::kInfo, 0, "reconnected to the bus");
      Wake(Trigger::kReconnect);
      return;
    }
    case observers::BusEvent::kDisconnected: {
      {
        MutexLock lock(mutex_);
        bus_connected_ = false;
      }
      if (metrics_ != nullptr) metrics_->SetBusConnected(false);
      Log(LogLevel::kWarn, 0, "disconnected from the bus");
      return;
    }
  }
}

bool Loop::NameForRepair(StreamName stream) {
  {
    MutexLock lock(mutex_);
    named_.insert(std::move(stream));  // bounded: only streams in scope
    // Held, nothing is repaired: the advisory wakes the observing full pass as any other.
    if (HeldLocked(Clock::now())) return false;
  }
  wake_cv_.notify_all();  // a repair is due (RepairDueLocked); the full pass only if it fails
  return true;
}

observers::EventSink Loop::MakeEventSink() {
  return
      [this](observers::BusEvent event, const std::string& subject) { OnBusEvent(event, subject); };
}

uint64_t Loop::RequestPassAsync(PassDone done) {
  Status refused;
  {
    MutexLock lock(mutex_);
    if (stopping_) {
      refused = Status(Errc::kUnavailable, "the reconciler is shutting down");
    } else if (waiters_.size() >= options_.max_waiting_requests) {
      refused = Status(Errc::kUnavailable, "too many reconcile requests waiting; try again");
    } else {
      const uint64_t ticket = ++next_ticket_;
      // Served by the first pass that starts from now on: every request that arrives while a
      // pass runs shares the next one.
      waiters_.push_back(Waiter{ticket, started_ + 1, std::move(done)});
      pending_ |= Bit(Trigger::kForced);
      last_forced_request_ = Clock::now();
      if (!first_forced_request_) first_forced_request_ = last_forced_request_;
      wake_cv_.notify_all();
      return ticket;
    }
  }
  done(refused);
  return 0;
}

bool Loop::CancelRequest(uint64_t ticket) {
  MutexLock lock(mutex_);
  return std::erase_if(waiters_, [&](const Waiter& w) { return w.ticket == ticket; }) > 0;
}

Result<PassReport> Loop::RequestPass(std::chrono::milliseconds timeout) {
  // The asynchronous request, waited for here. The slot outlives a caller that gave up.
  struct Slot {
    Mutex mutex;
    std::condition_variable cv;
    std::optional<Result<std::shared_ptr<const PassReport>>> result GUARDED_BY(mutex);
  };
  auto slot = std::make_shared<Slot>();
  const uint64_t ticket = RequestPassAsync([slot](Result<std::shared_ptr<const PassReport>> r) {
    MutexLock lock(slot->mutex);
    slot->result = std::move(r);
    slot->cv.notify_all();
  });
  MutexLock lock(slot->mutex);
  auto answered = [&]() REQUIRES(slot->mutex) { return slot->result.has_value(); };
  if (!slot->cv.wait_for(lock.native(), timeout, answered)) {
    lock.Unlock();
    if (CancelRequest(ticket)) {
      return Status(Errc::kTimeout,
                    "no pass finished within " + std::to_string(timeout.count() / 1000) + " s");
    }
    lock.Lock();  // being served right now: its answer follows at once
    slot->cv.wait(lock.native(), answered);
  }
  if (!slot->result->ok()) return slot->result->status();
  return **slot->result.value();
}

std::vector<Loop::PassDone> Loop::TakeServedLocked(uint64_t pass_id, bool all) {
  std::vector<PassDone> served;
  std::erase_if(waiters_, [&](Waiter& w) {
    if (!all && w.min_pass_id > pass_id) return false;
    served.push_back(std::move(w.done));
    return true;
  });
  return served;
}

namespace {

// Who asked, for a log line: the client's address, "unknown" when the server could not tell.
std::string ByForLog(const std::string& by) {
  return by.empty() ? std::string("unknown") : by;
}

// "none given" rather than an empty value: the log line then reads the same whatever the
// person typed, and a grep for reason= finds every hold.
std::string ReasonForLog(const std::string& reason) {
  return reason.empty() ? std::string("none given") : reason;
}

HoldState HeldState(int64_t until_unix_ms, const HoldRequest& request) {
  HoldState state;
  state.held = true;
  state.until_unix_ms = until_unix_ms;
  state.reason = request.reason;
  state.by = request.by;
  return state;
}

}  // namespace

Result<HoldState> Loop::Hold(std::chrono::milliseconds duration, const HoldRequest& request,
                             HoldScope scope) {
  if (duration.count() <= 0 || duration > options_.max_hold) {
    return Status(Errc::kInvalidArgument, "a hold lasts more than 0 and at most " +
                                              std::to_string(options_.max_hold.count() / 3600000) +
                                              "h");
  }
  if (scope == HoldScope::kBus && options_.lease_round.count() <= 0) {
    return Status(Errc::kInvalidArgument,
                  "a hold for the bus needs --lease (scope pod holds this instance alone)");
  }
  HoldState state;
  {
    MutexLock lock(mutex_);
    hold_until_ = Clock::now() + duration;
    hold_until_unix_ms_ = UnixMillisNow() + duration.count();
    hold_request_ = request;
    hold_expiry_pending_ = true;
    hold_standin_ = scope == HoldScope::kBus;
    if (scope == HoldScope::kBus) {
      bus_change_ = BusHoldChange{BusHoldChange::Kind::kWrite,
                                  BusHold{hold_until_unix_ms_, request.reason, request.by, ""}};
      bus_hold_error_.clear();
    }
    state = HeldState(hold_until_unix_ms_, request);
    state.scope = scope;
    // Under the lock that orders holds and releases: set after it, a release in between could
    // be overtaken and leave the gauge at 1 (silencing the drift alert) while not held.
    if (metrics_ != nullptr) metrics_->SetHeld(true);
  }
  wake_cv_.notify_all();  // the loop's next deadline changed, or a bus hold is to be written
  Log(LogLevel::kInfo, 0, "held: passes observe only",
      {{"scope", ToString(scope)},
       {"by", ByForLog(request.by)},
       {"reason", ReasonForLog(request.reason)},
       {"for_ms", duration.count()},
       {"until", FormatRfc3339Millis(state.until_unix_ms)}});
  return state;
}

bool Loop::Release(const HoldRequest& request) {
  bool was_held = false;
  HoldRequest ended;
  {
    MutexLock lock(mutex_);
    was_held = HeldLocked(Clock::now());
    if (!hold_until_ && bus_hold_) ended = {bus_hold_->reason, bus_hold_->by};
    if (hold_until_) ended = std::move(hold_request_);
    hold_request_ = {};
    hold_until_.reset();
    hold_expiry_pending_ = false;
    hold_standin_ = false;
    // With a lease, the bus hold's record is deleted whether or not this instance has read it
    // yet: a release through any instance ends the hold for all.
    if (options_.lease_round.count() > 0) {
      bus_change_ = BusHoldChange{BusHoldChange::Kind::kDelete, {}};
      bus_hold_error_.clear();
    }
    if (was_held) pending_ |= Bit(Trigger::kForced);
    // Under the lock: see Hold. Held still while the bus hold's record stands.
    if (metrics_ != nullptr) metrics_->SetHeld(HeldLocked(Clock::now()));
  }
  wake_cv_.notify_all();
  if (was_held) {
    Log(LogLevel::kInfo, 0, "released: passes apply again",
        {{"by", ByForLog(request.by)},
         {"reason", ReasonForLog(request.reason)},
         {"held_by", ByForLog(ended.by)},
         {"held_reason", ReasonForLog(ended.reason)}});
  }
  return was_held;
}

HoldScope Loop::default_hold_scope() const {
  return options_.lease_round.count() > 0 ? HoldScope::kBus : HoldScope::kPod;
}

void Loop::RunBusHoldChange(PassRunner& runner, const BusHoldChange& change) {
  const bool write = change.kind == BusHoldChange::Kind::kWrite;
  const Status done = CatchingBugs(
      metrics_, 0, write ? "bus hold write" : "bus hold deletion",
      [&] { return write ? runner.WriteBusHold(change.hold) : runner.DeleteBusHold(); },
      [](const std::string& error) { return Status(Errc::kInternal, error); });
  const BusHoldView view = CatchingBugs(
      metrics_, 0, "bus hold state", [&] { return runner.bus_hold(); },
      [](const std::string& error) {
        return BusHoldView{std::nullopt, error};
      });
  if (done.ok() && write) {
    Log(LogLevel::kInfo, 0, "bus hold written: every instance observes only",
        {{"scope", "bus"},
         {"by", ByForLog(change.hold.by)},
         {"reason", ReasonForLog(change.hold.reason)},
         {"until", FormatRfc3339Millis(change.hold.until_unix_ms)}});
  } else if (done.ok()) {
    Log(LogLevel::kInfo, 0, "bus hold deleted", {{"scope", "bus"}});
  } else {
    Log(LogLevel::kWarn, 0,
        write ? "bus hold not written: this instance alone is held"
              : "bus hold not deleted: it stands until it expires or a release succeeds",
        {{"scope", "bus"}, {"error", done.ToString()}});
  }
  MutexLock lock(mutex_);
  if (done.ok()) {
    bus_hold_error_.clear();
    // The record holds this instance now, like every other: the stand-in steps back, so that a
    // release through another instance releases this one too.
    if (write && hold_standin_) {
      hold_until_.reset();
      hold_expiry_pending_ = false;
      hold_standin_ = false;
      hold_request_ = {};
    }
    if (!write) pending_ |= Bit(Trigger::kForced);  // repair what drifted while held
  } else {
    bus_hold_error_ = done.ToString();
  }
  NoteBusHoldLocked(view);
}

void Loop::NoteBusHoldLocked(const BusHoldView& view) {
  if (view.known()) bus_hold_ = view.hold;
  if (metrics_ != nullptr) {
    metrics_->SetHeld(HeldLocked(Clock::now()));
    metrics_->SetBusHeld(bus_hold_ && InForce(*bus_hold_, UnixMillisNow()));
  }
}

Health Loop::health() const {
  MutexLock lock(mutex_);
  if (!thread_.joinable()) return {false, "the reconcile loop has not started"};
  if (exited_) return {false, "the reconcile loop has stopped"};
  const auto age = Clock::now() - heartbeat_;
  if (age > options_.stale_after) {
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(age).count();
    return {false, "no loop heartbeat for " + std::to_string(seconds) + " s" +
                       (running_pass_ ? " (pass " + std::to_string(started_) + " running)" : "")};
  }
  return {true, "alive"};
}

Readiness Loop::readiness() const {
  MutexLock lock(mutex_);
  if (!last_report_) return {false, "no pass has finished yet"};
  const PassReport& last = *last_report_;
  // Records first: with no valid records at all the pass never reaches the bus.
  if (!last.records_valid) {
    std::string reason = "records invalid";
    if (!last.records_errors.empty()) {
      reason += ": " + last.records_errors.front();
      if (last.records_errors.size() > 1) {
        reason += " (and " + std::to_string(last.records_errors.size() - 1) + " more)";
      }
    }
    return {false, reason};
  }
  if (!bus_connected_) {
    return {false,
            "bus unreachable" + (last.status.ok() ? std::string() : ": " + last.status.ToString())};
  }
  if (!last.status.ok()) return {false, "last pass failed: " + last.status.ToString()};
  if (!users_file_failing_.empty()) {
    return {false, "users file not written: " + users_file_failing_};
  }
  return {true, "ready"};
}

HoldState Loop::hold_state() const {
  MutexLock lock(mutex_);
  const Clock::time_point now = Clock::now();
  if (hold_until_ && now < *hold_until_) {
    HoldState state = HeldState(hold_until_unix_ms_, hold_request_);
    if (hold_standin_) {
      state.scope = HoldScope::kBus;
      state.published = false;
      state.error = bus_hold_error_;
    }
    return state;
  }
  if (bus_hold_ && InForce(*bus_hold_, UnixMillisNow())) {
    HoldState state = HeldState(bus_hold_->until_unix_ms, {bus_hold_->reason, bus_hold_->by});
    state.scope = HoldScope::kBus;
    state.published = true;
    state.through = bus_hold_->through;
    state.error = bus_hold_error_;  // a release that could not delete it
    return state;
  }
  return {};
}

std::shared_ptr<const std::string> Loop::last_report_json() const {
  std::shared_ptr<const PassReport> report;
  std::shared_ptr<const PassReport> failed;
  std::shared_ptr<const PassReport> failed_without_actions;
  {
    MutexLock lock(mutex_);
    if (last_report_json_ || !last_report_) return last_report_json_;
    report = last_report_;
    if (last_failed_report_ != last_report_) failed = last_failed_report_;
    if (last_failed_without_actions_report_ != last_report_) {
      failed_without_actions = last_failed_without_actions_report_;
    }
  }
  auto json = std::make_shared<const std::string>(
      DriftToJson(*report, failed.get(), failed_without_actions.get()));
  MutexLock lock(mutex_);
  // Cached only while it is still the last report (a pass may have finished meanwhile).
  if (last_report_ == report && !last_report_json_) last_report_json_ = json;
  return json;
}

std::optional<PassReport> Loop::last_report() const {
  MutexLock lock(mutex_);
  if (!last_report_) return std::nullopt;
  return *last_report_;
}

uint64_t Loop::passes_started() const {
  MutexLock lock(mutex_);
  return started_;
}

size_t Loop::waiting_requests() const {
  MutexLock lock(mutex_);
  return waiters_.size();
}

uint64_t Loop::passes_finished() const {
  MutexLock lock(mutex_);
  return finished_;
}

void Loop::NoteUsersFileLocked(const PassReport& report) {
  bool written = false;
  for (const ActionOutcome& o : report.outcomes) {
    if (o.action.kind != ActionKind::kWriteUsersFile) continue;
    if (o.outcome == Outcome::kDone) {
      written = true;
    } else if (o.outcome == Outcome::kFailed || o.outcome == Outcome::kRefused) {
      users_file_failing_ = o.detail.empty() ? std::string(ToString(o.outcome)) : o.detail;
      return;
    }
  }
  // While passwords are still being hashed the pass leaves the users file alone (it has no
  // full rendering to compare it with): that is not the file found as rendered. (The pass says
  // so itself: its count of pending passwords reaches 0 a moment before the job is collected.)
  const bool found_as_rendered =
      report.status.ok() && report.mode == ApplyMode::kApply &&
      report.users_file_check == UsersFileCheck::kCompared &&
      std::none_of(report.remaining.begin(), report.remaining.end(),
                   [](const DriftEntry& e) { return e.kind == ObjectKind::kUsersFile; });
  if (written || found_as_rendered) users_file_failing_.clear();
}

bool Loop::HeldLocked(Clock::time_point now) const {
  return (hold_until_ && now < *hold_until_) || (bus_hold_ && InForce(*bus_hold_, UnixMillisNow()));
}

std::chrono::milliseconds Loop::JitteredLocked(std::chrono::milliseconds base, double jitter) {
  std::uniform_real_distribution<double> factor(1.0 - jitter, 1.0 + jitter);
  return std::chrono::milliseconds(
      static_cast<int64_t>(static_cast<double>(base.count()) * factor(rng_)));
}

std::optional<Loop::Clock::time_point> Loop::FloorLocked() const {
  const uint32_t floored = Bit(Trigger::kAdvisory) | Bit(Trigger::kForced);
  if (pending_ == 0 || (pending_ & ~floored) != 0) return std::nullopt;
  // Each pending kind may run at its floor (at once without an earlier pass of its kind).
  std::optional<Clock::time_point> due;
  auto earliest = [&](Trigger kind, const std::optional<Clock::time_point>& last,
                      std::chrono::milliseconds floor) REQUIRES(mutex_) {
    if ((pending_ & Bit(kind)) == 0) return;
    const Clock::time_point at = last ? *last + floor : Clock::time_point::min();
    due = due ? std::min(*due, at) : at;
  };
  earliest(Trigger::kAdvisory, last_advisory_pass_, options_.advisory_floor);
  if ((pending_ & Bit(Trigger::kForced)) != 0) {
    Clock::time_point at = Clock::time_point::min();  // the first of a burst: at once
    if (last_forced_pass_) {
      // Past the floor, the burst must have paused: its requests still being read share
      // this pass rather than wake a third.
      const Clock::time_point floor = *last_forced_pass_ + options_.forced_floor;
      at = floor;
      // A burst that began after the floor is a new one: its first request runs at once.
      if (first_forced_request_ && *first_forced_request_ >= floor) {
        at = *first_forced_request_;
      } else if (last_forced_request_) {
        at = std::max(at, std::min(*last_forced_request_ + options_.forced_quiet,
                                   floor + options_.forced_max_wait));
      }
    }
    due = due ? std::min(*due, at) : at;
  }
  return due;
}

bool Loop::WakeDueLocked(Clock::time_point now) const {
  if (pending_ == 0) return false;
  const std::optional<Clock::time_point> floor = FloorLocked();
  return !floor || now >= *floor;
}

uint64_t Loop::repairs_run() const {
  MutexLock lock(mutex_);
  return repairs_;
}

bool Loop::RepairDueLocked(Clock::time_point now) const {
  return !named_.empty() && !stopping_ && !HeldLocked(now) && last_report_ != nullptr;
}

Loop::Repair Loop::BeginRepairLocked() {
  Repair repair;
  repair.pass_id = ++started_;
  repair.named.swap(named_);
  ++repairs_;
  running_pass_ = true;
  return repair;
}

RepairFollowUp Loop::RunRepair(PassRunner& runner, const Repair& repair) {
  const uint64_t pass_id = repair.pass_id;
  std::string names;
  for (const StreamName& n : repair.named) names += (names.empty() ? "" : ",") + n.str();
  Log(LogLevel::kInfo, pass_id, "pass scheduled",
      {{"trigger", ToString(Trigger::kRepair)}, {"mode", "apply"}, {"streams", names}});
  PassReport report =
      RunGuarded(runner, metrics_, pass_id, Trigger::kRepair, ApplyMode::kApply, repair.named)
          .report;  // one that threw has an internal error: not settled
  report.pass_id = pass_id;
  report.trigger = Trigger::kRepair;
  report.mode = ApplyMode::kApply;
  if (metrics_ != nullptr) metrics_->RecordRepair(report);
  return FollowUpOf(report, repair.named);
}

void Loop::FinishRepairLocked(uint64_t pass_id, RepairFollowUp follow_up) {
  // What the repair did not settle (not observed, not this instance's to act on, contested,
  // waiting for a store's removal, an action failed) is the full pass's, at the floor.
  if (follow_up == RepairFollowUp::kFullPass) pending_ |= Bit(Trigger::kAdvisory);
  running_pass_ = false;
  finished_ = pass_id;
  heartbeat_ = Clock::now();
  done_cv_.notify_all();
}

uint64_t Loop::advisories_ignored() const {
  MutexLock lock(mutex_);
  return advisories_ignored_;
}

Loop::Clock::time_point Loop::NextDueLocked() const {
  Clock::time_point due = next_periodic_;
  if (auto floor = FloorLocked()) due = std::min(due, *floor);
  if (retry_at_) due = std::min(due, *retry_at_);
  if (hold_until_ && hold_expiry_pending_) due = std::min(due, *hold_until_);
  if (options_.lease_round.count() > 0) due = std::min(due, next_lease_round_);
  return due;
}

std::optional<Trigger> Loop::TakeDueLocked(Clock::time_point now) {
  if (hold_until_ && hold_expiry_pending_ && now >= *hold_until_) {
    // The hold ran out on its own: a pass now repairs what was seen while held.
    hold_until_.reset();
    hold_expiry_pending_ = false;
    pending_ |= Bit(Trigger::kPeriodic);
    hold_standin_ = false;
    if (metrics_ != nullptr) metrics_->SetHeld(HeldLocked(now));
    Log(LogLevel::kInfo, 0, "hold expired: passes apply again",
        {{"held_by", ByForLog(hold_request_.by)},
         {"held_reason", ReasonForLog(hold_request_.reason)}});
    hold_request_ = {};
  }
  const bool retry_due = retry_at_ && now >= *retry_at_;
  const bool periodic_due = now >= next_periodic_;
  if (retry_due) pending_ |= Bit(Trigger::kRetry);
  if (periodic_due) pending_ |= Bit(Trigger::kPeriodic);
  if (!WakeDueLocked(now)) return std::nullopt;

  std::optional<Trigger> trigger;
  for (Trigger candidate : kTriggerPriority) {
    if ((pending_ & Bit(candidate)) != 0) {
      trigger = candidate;
      break;
    }
  }
  if (!trigger) trigger = Trigger::kForced;  // a trigger outside the list (kOnce): serve it
  // This pass serves every wake-up so far and every timer that is due.
  if ((pending_ & Bit(Trigger::kForced)) != 0) {
    last_forced_pass_ = now;
    first_forced_request_.reset();
  }
  pending_ = 0;
  if (retry_due) retry_at_.reset();
  if (periodic_due)
    next_periodic_ = now + JitteredLocked(options_.interval, options_.interval_jitter);
  return trigger;
}

// The reconcile thread: a scheduler of four kinds of work, one at a time, each taken under
// mutex_ and run without it. A bus hold change asked for by on-call first, then a pass that is
// due, else a repair of named streams, else a lease round; otherwise it waits for the next.
void Loop::Run(PassRunner& runner) {
  MutexLock lock(mutex_);
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    heartbeat_ = now;
    if (bus_change_) {
      const BusHoldChange change = std::move(*bus_change_);
      bus_change_.reset();
      lock.Unlock();
      RunBusHoldChange(runner, change);
      lock.Lock();
    } else if (std::optional<Trigger> trigger = TakeDueLocked(now)) {
      ScheduledPass scheduled = BeginPassLocked(*trigger, now);
      lock.Unlock();
      FinishedPass finished = RunScheduledPass(runner, std::move(scheduled));
      lock.Lock();
      std::vector<PassDone> served = FinishPassLocked(std::move(finished));
      if (!served.empty()) {
        const std::shared_ptr<const PassReport> report = last_report_;
        lock.Unlock();  // a waiter's callback may call into the loop
        for (PassDone& done : served) done(report);
        lock.Lock();
      }
    } else if (RepairDueLocked(now)) {
      const Repair repair = BeginRepairLocked();
      lock.Unlock();
      const RepairFollowUp follow_up = RunRepair(runner, repair);
      lock.Lock();
      FinishRepairLocked(repair.pass_id, follow_up);
    } else if (LeaseRoundDueLocked(now)) {
      const LeaseRoundWork work = BeginLeaseRoundLocked(now);
      lock.Unlock();
      const LeaseRoundDone done = RunLeaseRoundWork(runner, work);
      lock.Lock();
      FinishLeaseRoundLocked(done);
    } else {
      WaitForWorkLocked(lock, now);
    }
  }
  if (options_.lease_round.count() > 0) {
    lock.Unlock();
    ReleaseLeaseOnStop(runner);
    lock.Lock();
  }
  std::vector<PassDone> refused = ExitLocked();
  lock.Unlock();
  for (PassDone& done : refused)
    done(Status(Errc::kUnavailable, "the reconciler is shutting down"));
}

bool Loop::LeaseRoundDueLocked(Clock::time_point now) const {
  return options_.lease_round.count() > 0 && now >= next_lease_round_;
}

Loop::LeaseRoundWork Loop::BeginLeaseRoundLocked(Clock::time_point now) {
  next_lease_round_ = now + options_.lease_round;
  LeaseRoundWork work;
  work.participation = ParticipationFor(last_pass_, last_able_, now, options_.lease_grace);
  work.step_down = work.participation == LeaseParticipation::kStepDown && !stepped_down_;
  if (work.participation == LeaseParticipation::kStepDown) stepped_down_ = true;
  return work;
}

Loop::LeaseRoundDone Loop::RunLeaseRoundWork(PassRunner& runner, const LeaseRoundWork& work) {
  LeaseRoundDone done;
  if (work.participation == LeaseParticipation::kTakePart) {
    done.change = RunLeaseRoundGuarded(runner, metrics_);
  } else if (work.step_down) {
    // No pass could act for longer than the grace: renewing would keep the standbys out.
    Log(LogLevel::kWarn, 0,
        "not taking part in the lease (released if held): no pass got past observation",
        {{"grace_ms", options_.lease_grace.count()}});
    ReleaseLeaseGuarded(runner, metrics_);
  }
  UpdateLeaseHolder(runner, metrics_);
  done.hold = CatchingBugs(
      metrics_, 0, "bus hold state", [&] { return runner.bus_hold(); },
      [](const std::string& error) {
        return BusHoldView{std::nullopt, error};
      });
  return done;
}

void Loop::FinishLeaseRoundLocked(const LeaseRoundDone& done) {
  heartbeat_ = Clock::now();
  NoteBusHoldLocked(done.hold);
  if (done.change == LeaseChange::kAcquired) pending_ |= Bit(Trigger::kLeaseAcquired);
  if (done.change == LeaseChange::kHoldEnded) pending_ |= Bit(Trigger::kForced);
}

void Loop::WaitForWorkLocked(MutexLock& lock, Clock::time_point now) {
  const auto until = std::min(NextDueLocked(), now + options_.heartbeat);
  // A wake-up that is not due yet (an advisory within the floor) can still bring the next
  // due time forward: then wait again for that, not for the deadline computed before it.
  wake_cv_.wait_until(lock.native(), until, [&]() REQUIRES(mutex_) {
    const auto at = Clock::now();
    return stopping_ || WakeDueLocked(at) || RepairDueLocked(at) || NextDueLocked() < until;
  });
}

Loop::ScheduledPass Loop::BeginPassLocked(Trigger trigger, Clock::time_point now) {
  ScheduledPass scheduled;
  scheduled.pass_id = ++started_;
  scheduled.trigger = trigger;
  if (trigger == Trigger::kAdvisory) last_advisory_pass_ = now;
  scheduled.held = HeldLocked(now);
  scheduled.mode = scheduled.held ? ApplyMode::kObserveOnly : ApplyMode::kApply;
  scheduled.named.swap(named_);  // this pass observes everything; it repairs these first
  scheduled.previous_records_valid = last_report_ && last_report_->records_valid;
  if (last_report_) scheduled.previous_records_errors = last_report_->records_errors;
  running_pass_ = true;
  return scheduled;
}

Loop::FinishedPass Loop::RunScheduledPass(PassRunner& runner, ScheduledPass scheduled) {
  const uint64_t pass_id = scheduled.pass_id;
  // The pass logs its own progress and result; this line says why and how it runs.
  Log(LogLevel::kInfo, pass_id, "pass scheduled",
      {{"trigger", ToString(scheduled.trigger)},
       {"mode", kApplyModeNames.Name(scheduled.mode)},
       {"held", scheduled.held}});
  auto [report, threw] =
      RunGuarded(runner, metrics_, pass_id, scheduled.trigger, scheduled.mode, scheduled.named);
  FinishedPass finished;
  finished.threw = threw;
  report.pass_id = pass_id;
  report.trigger = scheduled.trigger;
  // A bus hold the pass read just before acting kept it from acting: held, observe-only.
  report.mode = report.bus_hold ? ApplyMode::kObserveOnly : scheduled.mode;
  report.held = scheduled.held || report.bus_hold.has_value();
  if (threw) {
    // The records were not read by this pass: what was known stays known.
    report.records_valid = scheduled.previous_records_valid;
    report.records_errors = std::move(scheduled.previous_records_errors);
  }
  std::optional<int64_t> expiry;
  try {
    finished.connected = runner.bus_connected();
    expiry = runner.bus_certificate_expiry();
  } catch (...) {
    Log(LogLevel::kError, pass_id, "reading the bus state threw (a bug)");
  }
  finished.result = PassSucceeded(report);
  // Past observation: the pass planned (its lease round ran, or the pass succeeded).
  finished.able = report.status.ok() || report.lease.role != LeaseRole::kUnknown;
  if (metrics_ != nullptr) {
    metrics_->RecordPass(report, UnixSecondsNow());
    metrics_->SetBusConnected(finished.connected);
    metrics_->SetCertificateExpiry(expiry);
  }
  if (options_.lease_round.count() > 0) {
    UpdateLeaseHolder(runner, metrics_);
    finished.hold = CatchingBugs(
        metrics_, pass_id, "bus hold state", [&] { return runner.bus_hold(); },
        [](const std::string& error) {
          return BusHoldView{std::nullopt, error};
        });
  }
  finished.report = std::move(report);
  return finished;
}

std::vector<Loop::PassDone> Loop::FinishPassLocked(FinishedPass finished) {
  PassReport& report = finished.report;
  const uint64_t pass_id = report.pass_id;
  running_pass_ = false;
  if (finished.hold) NoteBusHoldLocked(*finished.hold);
  bus_connected_ = finished.connected;
  const Clock::time_point now = Clock::now();
  if (!finished.threw)
    last_pass_ = finished.able ? LastPass::kPlanned : LastPass::kStoppedBeforePlan;
  if (finished.able && !finished.threw) {
    last_able_ = now;
    stepped_down_ = false;
  }
  heartbeat_ = now;
  next_lease_round_ = now + options_.lease_round;  // the pass ran one
  ScheduleRetryLocked(finished.result, report, now);
  finished_ = pass_id;
  NoteUsersFileLocked(report);
  if (report.advisory_scope) advisory_scope_ = report.advisory_scope;
  last_report_ = std::make_shared<const PassReport>(std::move(report));
  if (finished.result == PassResult::kFailure) {
    (last_report_->outcomes.empty() ? last_failed_without_actions_report_ : last_failed_report_) =
        last_report_;
  }
  last_report_json_.reset();
  done_cv_.notify_all();
  // Every request that was waiting when this pass started gets its report.
  return TakeServedLocked(pass_id, false);
}

void Loop::ScheduleRetryLocked(PassResult result, const PassReport& report, Clock::time_point now) {
  if (result == PassResult::kSuccess) {
    consecutive_failures_ = 0;
    retry_at_.reset();
  } else if (result == PassResult::kWaiting) {
    const auto delay = std::min(options_.not_ready_wait, options_.interval);
    retry_at_ = now + delay;
    const std::string reason = !report.status.ok()
                                   ? report.status.message()
                                   : std::to_string(report.plan.undescribed) +
                                         " of the mesh's objects not described by their leaders";
    Log(LogLevel::kInfo, report.pass_id, "waiting for the server",
        {{"in_ms", delay.count()}, {"reason", reason}});
  } else {
    ++consecutive_failures_;
    const auto delay =
        std::min(JitteredLocked(BackoffBase(consecutive_failures_, options_), kBackoffJitter),
                 BackoffCap(options_));
    retry_at_ = now + delay;
    Log(LogLevel::kInfo, report.pass_id, "retrying after a failed pass",
        {{"in_ms", delay.count()}, {"consecutive_failures", consecutive_failures_}});
  }
}

void Loop::ReleaseLeaseOnStop(PassRunner& runner) {
  // Stopping (SIGTERM): give the lease up so that a standby takes over at its next round,
  // instead of leaving 1.5 intervals without repairs while the entry ages out.
  ReleaseLeaseGuarded(runner, metrics_);
  UpdateLeaseHolder(runner, metrics_);
}

std::vector<Loop::PassDone> Loop::ExitLocked() {
  exited_ = true;
  done_cv_.notify_all();
  return TakeServedLocked(0, true);
}

}  // namespace mesh::reconciler
