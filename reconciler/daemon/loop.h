// The runner: one reconcile thread that runs passes, never two at once.
//
// Schedule. A pass at start, then every interval (jittered +-10%), and at once when woken
// (Wake: an advisory, a reconnect, a changed records or users file; RequestPass: on-call).
// Wake-ups that arrive while a pass runs are coalesced into ONE following pass; none is lost.
// A failed pass (status not ok, a failed action, or an exception caught here and counted) is
// retried after a capped exponential backoff with jitter (1 s, 2 s, 4 s, ... at most 60 s and
// never more than the interval); periodic passes go on meanwhile, and the first success resets
// the backoff.
//
// Lease. With LoopOptions::lease_round set, a lease round runs that often while no pass runs
// (PassRunner::RunLeaseRound); one that makes this instance the holder wakes a pass at once.
//
// Hold. While held (until a deadline that expires on its own: this runner reads the clock),
// passes run with ApplyMode::kObserveOnly. Release, or the deadline, wakes a pass at once so
// that drift seen during the hold is repaired without waiting for the interval. With a lease a
// hold is for the whole bus by default (reconciler/plan/bus_hold.h): its record is written and
// deleted on the reconcile thread between passes, every lease round reads it, and a round that
// finds it ended (released through another instance, or expired) wakes a pass too.
//
// Named repairs. An advisory that a stream the mesh owns was deleted or changed, or that a
// consumer on it was deleted (RepairTarget), names that stream and wakes no full pass: while no
// full pass is due, a kRepair pass runs at once for the named streams alone. A full pass at the
// advisory floor follows only a repair that did not settle its streams (FollowUpOf: not
// observed, not this instance's to act on, contested, waiting for a store's removal, a failed
// action); on a mesh whose full pass takes seconds, a deletion's repair would otherwise wait
// behind the full passes the deletions before it woke. A full pass repairs the streams named so
// far first. Repairs are not held back by the floor: each costs a few requests for the streams
// the mesh owns, and ephemerals never name one. Not while held: then the advisory wakes the
// (observing) full pass. A repair's report is counted and logged but is not the last report
// (/drift, /readyz and the drift gauges follow the full passes), never serves RequestPass, and
// never moves the backoff.
//
// Forced passes. RequestPass blocks its caller until a pass that STARTED after the request
// has finished, and returns that pass's report; RequestPassAsync is the same without blocking
// (the HTTP server's POST /reconcile: a waiting request holds no thread). Every request that
// arrives while a pass runs shares the next pass, and forced passes start at least
// `forced_floor` apart (the first of a burst at once), and a forced pass after the first also
// waits until no forced request has arrived for `forced_quiet` (at most `forced_max_wait`
// after its floor): a burst of any size runs at most two passes however long the daemon takes
// to read it, and every waiter gets the report of the pass that served it.
//
// Ownership: Loop does not own the PassRunner (it must outlive Stop) nor the Metrics.
// Thread-safety: Wake, OnBusEvent, RequestPass, Hold, Release and the snapshot accessors may
// be called from any thread; Wake and OnBusEvent never block on a pass (they are what cnats'
// callbacks and the file watcher call). Start and Stop are called by the owner's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "model/result.h"
#include "model/thread_safety.h"
#include "observers/bus.h"
#include "reconciler/daemon/backoff.h"
#include "reconciler/daemon/loop_options.h"
#include "reconciler/daemon/metrics.h"
#include "reconciler/http/daemon_view.h"
#include "reconciler/pass/pass.h"
#include "reconciler/plan/bus_hold.h"

namespace mesh::reconciler {

// What the loop needs of a pass: the seam between the scheduler and the Reconciler, so that
// the loop's concurrency can be tested with a scripted runner. Called on the reconcile thread
// only.
class PassRunner {
 public:
  virtual ~PassRunner() = default;
  // May throw only on a bug; the loop catches, counts and carries on.
  // `named`: the streams advisories asked to repair first (Reconciler::RunPass); with
  // Trigger::kRepair, only those.
  virtual PassReport RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                             const std::set<StreamName>& named) = 0;
  // A lease round between passes (LoopOptions::lease_round). May throw only on a bug.
  virtual LeaseChange RunLeaseRound() { return LeaseChange::kNone; }
  // Gives the lease up if held (stepping down, and when the loop stops). May throw only on a bug.
  virtual void ReleaseLease() {}
  // The lease as last seen; nullopt without one (then mesh_reconciler_lease_holder follows the
  // passes' reports alone).
  virtual std::optional<LeaseState> lease_state() const { return std::nullopt; }
  virtual bool bus_connected() const = 0;
  virtual std::optional<int64_t> bus_certificate_expiry() const = 0;
  // With a lease: writes or deletes the bus hold (Reconciler::WriteBusHold). May throw only on
  // a bug.
  virtual Status WriteBusHold(const BusHold& /*hold*/) {
    return Status(Errc::kUnavailable, "a hold for the bus needs --lease");
  }
  virtual Status DeleteBusHold() {
    return Status(Errc::kUnavailable, "a hold for the bus needs --lease");
  }
  // The bus hold as last read; no hold without a lease.
  virtual BusHoldView bus_hold() const { return {}; }
};

// The adapter over the real Reconciler.
class ReconcilerRunner : public PassRunner {
 public:
  ReconcilerRunner(PassSettings settings, observers::EventSink events,
                   std::optional<BackgroundHashing> background = std::nullopt)
      : reconciler_(std::move(settings), std::move(events), std::move(background)) {}
  PassReport RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                     const std::set<StreamName>& named) override {
    return reconciler_.RunPass(pass_id, trigger, mode, named);
  }
  LeaseChange RunLeaseRound() override { return reconciler_.RunLeaseRound(); }
  void ReleaseLease() override { reconciler_.ReleaseLease(); }
  std::optional<LeaseState> lease_state() const override { return reconciler_.lease_state(); }
  bool bus_connected() const override { return reconciler_.bus_connected(); }
  std::optional<int64_t> bus_certificate_expiry() const override {
    return reconciler_.bus_certificate_expiry();
  }
  Status WriteBusHold(const BusHold& hold) override { return reconciler_.WriteBusHold(hold); }
  Status DeleteBusHold() override { return reconciler_.DeleteBusHold(); }
  BusHoldView bus_hold() const override { return reconciler_.bus_hold(); }
  // Any thread (Reconciler::RotatePassword).
  void RotatePassword(std::string password) { reconciler_.RotatePassword(std::move(password)); }
  // After the loop stopped (Reconciler::StopHashing).
  HashingStop StopHashing(std::chrono::milliseconds wait) { return reconciler_.StopHashing(wait); }

 private:
  Reconciler reconciler_;
};

class Loop {
 public:
  // `metrics` may be null (tests of the schedule alone).
  Loop(LoopOptions options, Metrics* metrics);
  ~Loop();  // Stop(), waiting for the pass in flight however long it takes
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  // Starts the reconcile thread; the first pass (Trigger::kStart) runs at once.
  void Start(PassRunner& runner);
  // Asks the thread to exit after the pass in flight, and waits up to `grace` for it. True when
  // the thread has exited; false when a pass is still running (the caller may then abandon it
  // by exiting the process: the runner must not be destroyed while the thread runs).
  bool Stop(std::chrono::milliseconds grace);

  // Thread-safe, non-blocking.
  void Wake(Trigger trigger);
  // kAdvisory wakes a pass only for a lifecycle advisory about what the mesh owns
  // (AdvisoryWakes, with the last pass's scope); kReconnected wakes one; kDisconnected marks
  // the bus down; kStreamDeletionAnswered wakes nothing.
  void OnBusEvent(observers::BusEvent event, std::string_view subject);
  // An EventSink for the Reconciler that forwards to OnBusEvent (only pushes; never blocks).
  observers::EventSink MakeEventSink();

  // Blocks until a pass that started after this call has finished (its report), or `timeout`
  // (kTimeout), or the loop stops (kUnavailable), or too many callers wait (kUnavailable).
  Result<PassReport> RequestPass(std::chrono::milliseconds timeout);
  // RequestPass without blocking: `done` is called exactly once, never under the loop's lock:
  // on the reconcile thread with the report of the first pass that started after this call
  // (every waiter of a pass shares one report), at once on this thread when refused
  // (kUnavailable: stopping, too many waiting), or with kUnavailable when the loop stops.
  // Returns a ticket for CancelRequest (0 when `done` was already called). `done` must not
  // block: it runs on the reconcile thread.
  using PassDone = std::function<void(Result<std::shared_ptr<const PassReport>>)>;
  uint64_t RequestPassAsync(PassDone done);
  // Forgets a waiting request (its caller gave up): its `done` is then never called. False when
  // it is no longer waiting (its `done` has been or is being called).
  bool CancelRequest(uint64_t ticket);
  // Holds for `duration` from now (replacing any earlier hold); kInvalidArgument when not
  // positive or longer than max_hold, or kBus without a lease.
  // `request` is logged and kept with the hold. kBus: this instance is held at once (a pod
  // hold standing in), and the reconcile thread writes the bus hold's record next, between
  // passes; once written the record holds this instance like every other, and hold_state()
  // says published (or, when it could not be written, why, while the stand-in holds).
  Result<HoldState> Hold(std::chrono::milliseconds duration, const HoldRequest& request = {},
                         HoldScope scope = HoldScope::kPod);
  // Ends this instance's hold and, with a lease, the bus hold (its record is deleted by the
  // reconcile thread next: hold_state() is held until then); returns whether a hold was in
  // force. Wakes a pass when it was. The log line names who released and why, and the hold's
  // own reason.
  bool Release(const HoldRequest& request = {});
  // kBus with a lease (lease_round > 0), kPod without.
  HoldScope default_hold_scope() const;

  // Snapshots.
  Health health() const;
  Readiness readiness() const;
  HoldState hold_state() const;
  // /drift: DriftToJson of the last finished pass and of the last failed ones when they are
  // other passes (keys "last_failed": with outcomes; "last_failed_without_actions": without);
  // null before the first. Serialised on the first
  // call after each pass (on the caller's thread, outside the loop's lock) and then shared:
  // a pass that nobody asks about is never serialised (on a first convergence of a large
  // mesh its report runs to megabytes).
  std::shared_ptr<const std::string> last_report_json() const;
  std::optional<PassReport> last_report() const;
  uint64_t passes_started() const;
  uint64_t passes_finished() const;
  uint64_t advisories_ignored() const;  // advisories about what the mesh does not own
  uint64_t repairs_run() const;         // kRepair passes (counted in passes_started too)
  size_t waiting_requests() const;      // RequestPass callers now waiting

 private:
  using Clock = std::chrono::steady_clock;
  struct Waiter {
    uint64_t ticket = 0;
    uint64_t min_pass_id = 0;
    PassDone done;
  };

  void Run(PassRunner& runner);
  // Under mutex_: picks the trigger of the next pass if one is due now, and consumes every
  // wake-up and due timer it serves.
  std::optional<Trigger> TakeDueLocked(Clock::time_point now) REQUIRES(mutex_);
  Clock::time_point NextDueLocked() const REQUIRES(mutex_);
  // Whether a pending wake-up may be served now (advisories and forced requests alone wait for
  // their floors).
  bool WakeDueLocked(Clock::time_point now) const REQUIRES(mutex_);
  // When the pending wake-ups may be served, if they must wait for a floor: only advisories
  // and forced requests pending, each after its floor; the earliest of them.
  std::optional<Clock::time_point> FloorLocked() const REQUIRES(mutex_);
  // Removes the waiters that pass `pass_id` serves (every one, with `all`).
  std::vector<PassDone> TakeServedLocked(uint64_t pass_id, bool all) REQUIRES(mutex_);
  bool HeldLocked(Clock::time_point now) const REQUIRES(mutex_);
  std::chrono::milliseconds JitteredLocked(std::chrono::milliseconds base, double jitter)
      REQUIRES(mutex_);
  // Whether a kRepair pass is due now: streams named, no full pass due, not held, and a full
  // pass has finished (it knows the streams before their deletion: WaitForRemovedStores).
  bool RepairDueLocked(Clock::time_point now) const REQUIRES(mutex_);
  // A kRepair pass in three steps: taken under mutex_, run without it, finished under it.
  struct Repair {
    uint64_t pass_id = 0;
    std::set<StreamName> named;
  };
  Repair BeginRepairLocked() REQUIRES(mutex_);
  RepairFollowUp RunRepair(PassRunner& runner, const Repair& repair) EXCLUDES(mutex_);
  void FinishRepairLocked(uint64_t pass_id, RepairFollowUp follow_up) REQUIRES(mutex_);
  // An advisory's stream, named for a repair. False when held: the caller then wakes the full
  // pass (observe only) as for any other advisory.
  bool NameForRepair(StreamName stream) EXCLUDES(mutex_);
  void NoteUsersFileLocked(const PassReport& report) REQUIRES(mutex_);
  // The bus hold: a write or deletion asked for by Hold or Release, run between passes.
  struct BusHoldChange {
    enum class Kind { kWrite, kDelete };
    Kind kind = Kind::kWrite;
    BusHold hold;  // kWrite
  };
  void RunBusHoldChange(PassRunner& runner, const BusHoldChange& change) EXCLUDES(mutex_);
  // Takes the bus hold as the runner read it (an unreadable one leaves the last known); keeps
  // the held gauges in step.
  void NoteBusHoldLocked(const BusHoldView& view) REQUIRES(mutex_);
  // A lease round between passes, in three steps like a repair (Run).
  struct LeaseRoundWork {
    LeaseParticipation participation = LeaseParticipation::kTakePart;
    bool step_down = false;  // release the lease now: no pass got past observation
  };
  struct LeaseRoundDone {
    LeaseChange change = LeaseChange::kNone;
    BusHoldView hold;
  };
  bool LeaseRoundDueLocked(Clock::time_point now) const REQUIRES(mutex_);
  LeaseRoundWork BeginLeaseRoundLocked(Clock::time_point now) REQUIRES(mutex_);
  LeaseRoundDone RunLeaseRoundWork(PassRunner& runner, const LeaseRoundWork& work) EXCLUDES(mutex_);
  void FinishLeaseRoundLocked(const LeaseRoundDone& done) REQUIRES(mutex_);
  // A pass, in three steps: what it runs for (taken under mutex_), the pass and its metrics
  // (without it), and its report kept, the retry scheduled and the waiters it serves (under it).
  struct ScheduledPass {
    uint64_t pass_id = 0;
    Trigger trigger = Trigger::kStart;
    ApplyMode mode = ApplyMode::kApply;
    bool held = false;
    std::set<StreamName> named;  // repaired first
    // What the last report knew of the records, kept when this pass throws before reading them.
    bool previous_records_valid = false;
    std::vector<std::string> previous_records_errors;
  };
  struct FinishedPass {
    PassReport report;
    bool threw = false;
    bool connected = false;
    bool able = false;  // it got past observation
    PassResult result = PassResult::kSuccess;
    std::optional<BusHoldView> hold;  // with a lease: the bus hold as read after the pass
  };
  ScheduledPass BeginPassLocked(Trigger trigger, Clock::time_point now) REQUIRES(mutex_);
  FinishedPass RunScheduledPass(PassRunner& runner, ScheduledPass scheduled) EXCLUDES(mutex_);
  std::vector<PassDone> FinishPassLocked(FinishedPass finished) REQUIRES(mutex_);
  // The backoff and the wait for the server (backoff.h): when the next pass retries, if any.
  void ScheduleRetryLocked(PassResult result, const PassReport& report, Clock::time_point now)
      REQUIRES(mutex_);
  // Until a wake-up, a due time or the heartbeat.
  void WaitForWorkLocked(MutexLock& lock, Clock::time_point now) REQUIRES(mutex_);
  // Stopping: the lease released (with a lease), then the loop marked exited and every waiter
  // taken, to be refused.
  void ReleaseLeaseOnStop(PassRunner& runner) EXCLUDES(mutex_);
  std::vector<PassDone> ExitLocked() REQUIRES(mutex_);

  const LoopOptions options_;
  Metrics* const metrics_;

  mutable Mutex mutex_;
  std::condition_variable wake_cv_;          // the reconcile thread waits on it
  std::condition_variable done_cv_;          // RequestPass and Stop wait on it
  uint32_t pending_ GUARDED_BY(mutex_) = 0;  // bit per Trigger: wake-ups not yet served
  bool stopping_ GUARDED_BY(mutex_) = false;
  bool exited_ GUARDED_BY(mutex_) = false;
  bool running_pass_ GUARDED_BY(mutex_) = false;
  uint64_t started_ GUARDED_BY(mutex_) = 0;
  uint64_t finished_ GUARDED_BY(mutex_) = 0;
  Clock::time_point next_periodic_ GUARDED_BY(mutex_){};
  Clock::time_point next_lease_round_ GUARDED_BY(mutex_){};  // when lease_round > 0
  // When a pass last got past observation (the lease's renewal policy); stepped_down_: the
  // lease was released for want of one, and is not released again until one does.
  std::optional<Clock::time_point> last_able_ GUARDED_BY(mutex_);
  LastPass last_pass_ GUARDED_BY(mutex_) = LastPass::kStoppedBeforePlan;
  bool stepped_down_ GUARDED_BY(mutex_) = false;
  std::optional<Clock::time_point> retry_at_ GUARDED_BY(mutex_);
  int consecutive_failures_ GUARDED_BY(mutex_) = 0;
  std::optional<Clock::time_point> hold_until_ GUARDED_BY(mutex_);
  int64_t hold_until_unix_ms_ GUARDED_BY(mutex_) = 0;
  HoldRequest hold_request_ GUARDED_BY(mutex_);          // the holder's, while hold_until_ is set
  bool hold_expiry_pending_ GUARDED_BY(mutex_) = false;  // a pass is owed when the hold expires
  // The pod hold stands in for a bus hold whose record is not written yet (or could not be).
  bool hold_standin_ GUARDED_BY(mutex_) = false;
  std::optional<BusHoldChange> bus_change_ GUARDED_BY(mutex_);  // asked for, not yet run
  std::optional<BusHold> bus_hold_ GUARDED_BY(mutex_);          // as the runner last read it
  std::string bus_hold_error_ GUARDED_BY(mutex_);               // why the last change failed
  Clock::time_point heartbeat_ GUARDED_BY(mutex_){};
  bool bus_connected_ GUARDED_BY(mutex_) = false;
  std::shared_ptr<const AdvisoryScope> advisory_scope_
      GUARDED_BY(mutex_);  // from the last pass that observed
  std::optional<Clock::time_point> last_advisory_pass_
      GUARDED_BY(mutex_);  // start of the last advisory-woken pass
  std::optional<Clock::time_point> last_forced_pass_
      GUARDED_BY(mutex_);  // start of the last pass that served a forced wake-up
  std::optional<Clock::time_point> last_forced_request_
      GUARDED_BY(mutex_);  // arrival of the last forced request (RequestPassAsync)
  std::optional<Clock::time_point> first_forced_request_
      GUARDED_BY(mutex_);  // arrival of the first forced request no pass has taken yet
  std::set<StreamName> named_
      GUARDED_BY(mutex_);                    // streams advisories asked to repair, not yet served
  uint64_t repairs_ GUARDED_BY(mutex_) = 0;  // kRepair passes run
  uint64_t advisories_ignored_ GUARDED_BY(mutex_) = 0;
  std::shared_ptr<const PassReport> last_report_ GUARDED_BY(mutex_);
  // The last pass that failed (PassSucceeded: kFailure) with outcomes, and the last one that
  // failed without any (before acting); /drift shows each beside the last pass. Kept apart so
  // that passes failing while the bus is down do not hide the one whose actions failed.
  std::shared_ptr<const PassReport> last_failed_report_ GUARDED_BY(mutex_);
  std::shared_ptr<const PassReport> last_failed_without_actions_report_ GUARDED_BY(mutex_);
  // Why the last write of the users file failed; empty once a pass wrote it or found it as
  // rendered. Non-empty: /readyz is unready (the server may be running on stale credentials).
  std::string users_file_failing_ GUARDED_BY(mutex_);
  // ReportToJson(*last_report_) once someone asked for it; reset by every finished pass.
  mutable std::shared_ptr<const std::string> last_report_json_ GUARDED_BY(mutex_);
  std::vector<Waiter> waiters_ GUARDED_BY(mutex_);
  uint64_t next_ticket_ GUARDED_BY(mutex_) = 0;
  std::mt19937_64 rng_ GUARDED_BY(mutex_);
  std::thread thread_;  // Start and Stop only (the owner's thread)
};

}  // namespace mesh::reconciler
