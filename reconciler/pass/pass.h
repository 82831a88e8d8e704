// One reconcile pass, level-triggered and idempotent: re-read the records, re-observe
// everything (JetStream, users file, monitoring endpoint), plan, and (unless observing only)
// apply, then re-observe to report what remains. Retries, backoff and scheduling are the
// runner's (reconciler/daemon/loop.h), never the pass's.
//
// Ownership: Reconciler owns its bus connection (connected lazily, kept across passes) and the
// bcrypt cache. Thread-safety: RunPass is called from one thread (the reconcile thread); the
// EventSink given at construction is invoked on cnats' threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/names.h"
#include "model/records.h"
#include "model/result.h"
#include "observers/bus.h"
#include "reconciler/apply/apply.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/plan/advisory_filter.h"
#include "reconciler/plan/bus_hold.h"
#include "reconciler/plan/contest.h"
#include "reconciler/plan/lease.h"
#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

enum class Trigger {
  kStart,
  kPeriodic,
  kAdvisory,
  kReconnect,
  kRecordsChanged,
  kUsersFileChanged,
  kForced,
  kRetry,
  kLeaseAcquired,  // a lease round between passes made this instance the holder
  kOnce,           // the CLI's plan / reconcile --once
  // Only the streams that advisories named (deleted or changed), between full passes: the
  // loop runs one at once, inside the advisory floor, and the full pass follows at the floor.
  kRepair,
};
const char* ToString(Trigger v);  // "start", "periodic", "advisory", ... (metric label values)

// Whether the server could answer for its JetStream state when the pass observed it.
enum class ServerReadiness { kReady, kNotReady };

// What the pass did with the users file: compared it with a rendering (and planned what
// differs), or left it alone because passwords were still being hashed on the background
// threads (no rendering yet), or none is managed (no --users-file, or the pass stopped first).
enum class UsersFileCheck { kNone, kCompared, kLeftAlone };

struct PassReport {
  uint64_t pass_id = 0;
  Trigger trigger = Trigger::kOnce;
  ApplyMode mode = ApplyMode::kApply;
  bool held = false;  // observe-only because on-call holds the reconciler
  // Ok, or why the pass could not plan at all (records never valid, bus unreachable, server
  // not ready). Failed actions do not make this non-ok; see `outcomes`. When the bus could not
  // be observed, `plan`, `outcomes` and `remaining` still hold the users file's part: it is
  // local, and repaired whether or not the server answers.
  Status status;
  // kNotReady: the pass stopped at the readiness gate (status says why): a wait, not a failure.
  ServerReadiness readiness = ServerReadiness::kReady;
  // Streams and consumers the server's /healthz reports unhealthy, in its words (also drift
  // entries of state "unhealthy" when the mesh desires them).
  std::vector<observers::ObjectHealth> unhealthy;
  bool records_valid = false;
  std::vector<std::string> records_errors;   // of the current file, when invalid
  std::vector<UserName> without_credential;  // principals left out of the users file
  PlanResult plan;                           // drift and actions found at the start
  // The streams the pass repaired first, before it observed the whole account (the streams
  // advisories named: RunPass's `named`); their drift, actions and outcomes come first in
  // `plan` and `outcomes`. With kRepair they are all the pass looked at.
  std::vector<StreamName> repaired_first;
  std::vector<ActionOutcome> outcomes;  // what apply did (empty when observing only)
  std::vector<DriftEntry> remaining;    // drift after apply (re-observed)
  std::vector<std::string> remaining_problems;
  double duration_seconds = 0;
  int64_t finished_unix_ms = 0;  // wall clock, for people (`status`); 0 when not known
  std::string server_version;    // as the server's /varz said it; empty when not observed
  int64_t api_requests = 0;
  // Lanes (observers::Spread::kLanes) the bus failed to open since the previous pass's report
  // (logged as a warning; mesh_reconciler_bus_lane_open_failures_total). Not in the JSON report.
  int64_t lane_open_failures = 0;
  // Plain passwords this pass ran through bcrypt (0 when every hash was cached or reused).
  int64_t passwords_hashed = 0;
  // Plain passwords still being hashed on the background threads (the daemon): while non-zero
  // the users file is left as it is (or given the reconciler's own entry first), and JetStream
  // is repaired all the same; the pass is not converged (a remaining problem says so).
  int64_t credentials_pending = 0;
  UsersFileCheck users_file_check = UsersFileCheck::kNone;
  // Objects found changed back by another writer since our update (reconciler/plan/contest.h),
  // each logged once; and how many objects are in a contest after this pass (backed off: their
  // updates are skipped, their drift entries say so; nullopt when the pass did not review them:
  // observing only, or stopped first). Not in the JSON report (the drift entries' notes are).
  std::vector<ContestFound> contests;
  std::optional<int64_t> contested_objects;
  // The lease this pass ran under: kOff without --lease; kUnknown when the pass stopped before
  // its lease round.
  LeaseState lease;
  // With --lease: the bus hold (reconciler/plan/bus_hold.h) that kept this pass from acting,
  // when one did; the loop then reports the pass as held and observe-only.
  std::optional<BusHold> bus_hold;
  // What the mesh owns as this pass observed it (which advisories wake the next pass); null when
  // the pass could not observe.
  std::shared_ptr<const AdvisoryScope> advisory_scope;
  // Ok pass, nothing remaining, no failed action.
  bool converged() const;
  bool any_action_failed() const;
};

// The reconciler's own principal as a pass derives it: its user (--user), its password as a
// plain credential when it has one (none otherwise), and with --lease the lease's KV subject
// to publish to.
model::ReconcilerIdentity OwnIdentity(const PassSettings& settings);

// Reconciler::StopHashing: the hashes under way ended within the wait, or are still running.
enum class HashingStop { kStopped, kStillRunning };

// The daemon's hashing on its own threads. Without it (the CLI), a pass hashes what it needs
// before it observes. Both hooks are called from the hashing thread and must not block.
struct BackgroundHashing {
  std::function<void()> ready;                    // the users file can now be rendered: wake
  std::function<void(int64_t pending)> progress;  // plain passwords still to hash (a gauge)
};

class Reconciler {
 public:
  Reconciler(PassSettings settings, observers::EventSink events = nullptr,
             std::optional<BackgroundHashing> background = std::nullopt);
  ~Reconciler();

  // `named`: streams advisories named since the last pass (deleted, changed, or a consumer of
  // theirs deleted). When applying, the pass first observes, plans and repairs these alone (a
  // few requests), then the whole account as always; with Trigger::kRepair only these.
  PassReport RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                     const std::set<StreamName>& named = {});

  // With --lease, between passes: one lease round on the connection the last pass used (none
  // when it is down). kAcquired when this round made this instance the holder. Called on the
  // reconcile thread only, like RunPass.
  LeaseChange RunLeaseRound();
  // With --lease: gives the lease up when this instance holds it (on SIGTERM, or when its
  // passes cannot act: ParticipationFor). Reconcile thread only.
  void ReleaseLease();
  // The lease as last seen (role kOff without --lease). Reconcile thread only.
  LeaseState lease_state() const;
  // With --lease: writes the bus hold (replacing one in force; `hold.through` is set to this
  // instance's lease identity) or deletes it, on the connection the last pass used. Reconcile
  // thread only; kUnavailable without a lease or a connection.
  Status WriteBusHold(BusHold hold);
  Status DeleteBusHold();
  // The bus hold as last read (at a lease round or before a pass acted). Reconcile thread only.
  BusHoldView bus_hold() const;

  bool bus_connected() const;
  // The expiry (Unix seconds) of the bus's TLS certificate, when known.
  std::optional<int64_t> bus_certificate_expiry() const;

  // Any thread: the reconciler's own password changed (its file was rotated). The next pass
  // renders it into the users file (re-using every other hash the file proves); connections
  // log in with it once the server has loaded that file, without a failed pass between.
  void RotatePassword(std::string password);

  // Cancels the background hashing (BackgroundHashing) and waits up to `wait` for the hashes
  // under way: bcrypt cannot be interrupted, and at a high cost on a saturated CPU one can take
  // minutes. kStillRunning: they are still running, on this object; it must then not be
  // destroyed (the caller exits the process instead). Only while no pass runs.
  HashingStop StopHashing(std::chrono::milliseconds wait);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Readable table of drift and actions (what on-call reads) and its JSON form (/drift,
// plan --json, POST /reconcile). ReportFromJson reads back what ReportToJson wrote (the remote
// CLI prints a daemon's answer with FormatReportTable). No secrets in either.
//
// Every JSON output names its schema first ("schema": "mesh-reconciler/<kind>/v<major>"), each
// described by docs/schemas/<kind>.v<major>.schema.json; a reader refuses a major version it
// does not know. Adding a member is compatible; renaming, removing or retyping one is a new
// major version.
inline constexpr const char* kReportSchema = "mesh-reconciler/report/v1";
inline constexpr const char* kDriftSchema = "mesh-reconciler/drift/v1";
std::string FormatReportTable(const PassReport& report);
std::string ReportToJson(const PassReport& report);
// /drift: `last` as ReportToJson writes it (under kDriftSchema), and, when given, the last failed
// pass that acted (it has outcomes: an action failed, or the pass failed after apply) under the
// key "last_failed", and the last failed pass that did not act (it failed before apply: the
// observation or the plan failed; no outcomes) under "last_failed_without_actions", each in the
// same form, so that what a failed pass did outlives the passes after it: a later pass that
// fails before acting (the bus down) no longer hides the one with the failed actions.
std::string DriftToJson(const PassReport& last, const PassReport* last_failed,
                        const PassReport* last_failed_without_actions = nullptr);
// Reads a report (kReportSchema; kDriftSchema, whose own members it ignores; or no schema: a
// daemon older than the contract); another schema is refused with its name.
Result<PassReport> ReportFromJson(const std::string& json);

}  // namespace mesh::reconciler
