// What a pass did (PassReport: why it ran, what it found, did and left), and the forms on-call
// and programs read it in: the table, the JSON report and /drift, and reading a report back.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/enum_names.h"
#include "model/names.h"
#include "model/result.h"
#include "observers/observed.h"
#include "reconciler/apply/apply.h"
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
inline constexpr EnumNames<Trigger, 11> kTriggerNames{{{
    {Trigger::kStart, "start"},
    {Trigger::kPeriodic, "periodic"},
    {Trigger::kAdvisory, "advisory"},
    {Trigger::kReconnect, "reconnect"},
    {Trigger::kRecordsChanged, "records_changed"},
    {Trigger::kUsersFileChanged, "users_file_changed"},
    {Trigger::kForced, "forced"},
    {Trigger::kRetry, "retry"},
    {Trigger::kLeaseAcquired, "lease_acquired"},
    {Trigger::kOnce, "once"},
    {Trigger::kRepair, "repair"},
}}};
static_assert(kTriggerNames.Dense());
const char* ToString(Trigger v);  // "start", "periodic", "advisory", ... (metric label values)

// Whether the server could answer for its JetStream state when the pass observed it.
enum class ServerReadiness { kReady, kNotReady };
inline constexpr EnumNames<ServerReadiness, 2> kServerReadinessNames{{{
    {ServerReadiness::kReady, "ready"},
    {ServerReadiness::kNotReady, "not_ready"},
}}};
static_assert(kServerReadinessNames.Dense());

// What the pass did with the users file: compared it with a rendering (and planned what
// differs), or left it alone because passwords were still being hashed on the background
// threads (no rendering yet), or none is managed (no --users-file, or the pass stopped first).
enum class UsersFileCheck { kNone, kCompared, kLeftAlone };
inline constexpr EnumNames<UsersFileCheck, 3> kUsersFileCheckNames{{{
    {UsersFileCheck::kNone, "none"},
    {UsersFileCheck::kCompared, "compared"},
    {UsersFileCheck::kLeftAlone, "left_alone"},
}}};
static_assert(kUsersFileCheckNames.Dense());

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
