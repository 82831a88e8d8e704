// Diff and plan: the pure heart of a pass (after leveldb's VersionEdit). From the desired state,
// the users file as it should be rendered, and the observed state, compute the drift report and
// the ordered actions. No I/O, no clock: the same inputs always give the same plan, and the plan
// is empty when the bus has converged.
//
// Thread-safety: free functions over values.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/enum_names.h"
#include "model/names.h"
#include "model/users_file.h"
#include "observers/observed.h"

namespace mesh::reconciler {

enum class ObjectKind { kUsersFile, kStream, kConsumer };
inline constexpr EnumNames<ObjectKind, 3> kObjectKindNames{{{
    {ObjectKind::kUsersFile, "users_file"},
    {ObjectKind::kStream, "stream"},
    {ObjectKind::kConsumer, "consumer"},
}}};
static_assert(kObjectKindNames.Dense());
// kUnhealthy: present, but the server's /healthz reports it unhealthy (its words in the note);
//   information only, nothing to do, so it does not make a plan unconverged.
// kUnrecoverable: desired, absent from the server's lists, and the server reports a store under
//   that name it could not load ("could not be recovered": damaged, half-created at a crash, or
//   still being removed after a deletion). Never created over, never deleted (docs/faults.md).
enum class DriftState { kMissing, kDiffers, kUnexpected, kUnhealthy, kUnrecoverable };
inline constexpr EnumNames<DriftState, 5> kDriftStateNames{{{
    {DriftState::kMissing, "missing"},
    {DriftState::kDiffers, "differs"},
    {DriftState::kUnexpected, "unexpected"},
    {DriftState::kUnhealthy, "unhealthy"},
    {DriftState::kUnrecoverable, "unrecoverable"},
}}};
static_assert(kDriftStateNames.Dense());
// What the reconciler will (or may) do about one drift entry.
enum class Remedy {
  kCreate,         // missing: create it
  kUpdateInPlace,  // differs in fields the server lets us update
  kRewrite,        // users file: write the rendering and reload the server
  kReload,         // users file: on disk as rendered, but the server has not loaded it
  kReportOnly,     // differs in a field the server will not update in place (never recreated)
  kUnsatisfiable,  // the records ask for more than this bus can give (replicas > cluster)
  kPrune,          // unexpected, and pruning was asked for: delete it
  kLeave,          // unexpected, pruning not asked for: report only
};
inline constexpr EnumNames<Remedy, 8> kRemedyNames{{{
    {Remedy::kCreate, "create"},
    {Remedy::kUpdateInPlace, "update_in_place"},
    {Remedy::kRewrite, "rewrite"},
    {Remedy::kReload, "reload"},
    {Remedy::kReportOnly, "report_only"},
    {Remedy::kUnsatisfiable, "unsatisfiable"},
    {Remedy::kPrune, "prune"},
    {Remedy::kLeave, "leave"},
}}};
static_assert(kRemedyNames.Dense());

const char* ToString(ObjectKind v);  // "users_file", "stream", "consumer" (metric label values)
// "missing", "differs", "unexpected", "unhealthy", "unrecoverable"
const char* ToString(DriftState v);
const char* ToString(Remedy v);

struct FieldDiff {
  std::string field;  // "subjects", "max_age", "retention", "principal mesh-controller", ...
  std::string wanted;
  std::string found;
  bool operator==(const FieldDiff&) const = default;
};

struct DriftEntry {
  ObjectKind kind = ObjectKind::kStream;
  std::string name;  // stream name, "<stream>/<durable>", or the users file path
  DriftState state = DriftState::kMissing;
  std::vector<FieldDiff> fields;  // for kDiffers
  Remedy remedy = Remedy::kCreate;
  bool repairable_in_place() const {
    return remedy == Remedy::kCreate || remedy == Remedy::kUpdateInPlace ||
           remedy == Remedy::kRewrite || remedy == Remedy::kReload || remedy == Remedy::kPrune;
  }
  std::string note;  // human explanation, e.g. "retention cannot change in place (10052)"
  bool operator==(const DriftEntry&) const = default;
};

enum class ActionKind {
  kWriteUsersFile,  // write atomically, then reload the server and confirm
  kReloadServer,    // only reload and confirm
  kCreateStream,
  kUpdateStream,
  kDeleteStream,
  kCreateConsumer,
  kUpdateConsumer,
  kDeleteConsumer,
};
inline constexpr EnumNames<ActionKind, 8> kActionKindNames{{{
    {ActionKind::kWriteUsersFile, "write_users_file"},
    {ActionKind::kReloadServer, "reload_server"},
    {ActionKind::kCreateStream, "create_stream"},
    {ActionKind::kUpdateStream, "update_stream"},
    {ActionKind::kDeleteStream, "delete_stream"},
    {ActionKind::kCreateConsumer, "create_consumer"},
    {ActionKind::kUpdateConsumer, "update_consumer"},
    {ActionKind::kDeleteConsumer, "delete_consumer"},
}}};
static_assert(kActionKindNames.Dense());
const char* ToString(ActionKind v);  // "write_users_file", "create_stream", ...
// Metric labels for mesh_reconciler_repairs_total{kind,action}: kind as ObjectKind, action "create"
// | "update" | "delete" | "write" | "reload".
ObjectKind KindOf(ActionKind v);
const char* VerbOf(ActionKind v);
// An update in place (of a stream or a consumer): what fight detection watches (contest.h).
bool IsUpdate(ActionKind v);

struct Action {
  ActionKind kind = ActionKind::kCreateStream;
  std::string name;                             // as in DriftEntry
  std::optional<model::StreamSpec> stream;      // create/update stream
  std::optional<model::ConsumerSpec> consumer;  // create/update consumer
  StreamName target_stream;                     // delete stream / consumer
  ConsumerName target_consumer;                 // delete consumer
  std::string users_file_bytes;                 // kWriteUsersFile (no plain password in it)
  // Updates: the server's whole config as observed; apply changes only the owned fields in it.
  std::string observed_config;
  bool operator==(const Action&) const = default;
};

// The stream a consumer action is on: its spec's (create, update) or its target (delete).
inline const StreamName& ConsumerStream(const Action& a) {
  return a.consumer ? a.consumer->stream : a.target_stream;
}

// A deletion, named as the plan names drift entries ("STREAM", "STREAM/durable"): what --prune
// plans, and what the on-call CLI's delete-stream and delete-consumer apply.
Action DeleteStreamAction(const StreamName& stream);
Action DeleteConsumerAction(const StreamName& stream, const ConsumerName& consumer);

struct PlanOptions {
  Prune prune = Prune::kNo;
  std::string users_file_path;  // names the users-file drift entry; empty: users file unmanaged
  // The users file must be a regular file (not a symbolic link) with mode 0600, owned by this
  // uid (the reconciler's own): anything else is drift, repaired by a rewrite. nullopt: the
  // owner is not checked (the mode and the kind still are).
  std::optional<int64_t> users_file_owner_uid = std::nullopt;
};

struct PlanResult {
  std::vector<DriftEntry> drift;  // users file first, then streams, then consumers; by name
  std::vector<Action> actions;    // users file first, then streams, then consumers
  // Records-level problems found only against the live bus (e.g. replicas > cluster size).
  std::vector<std::string> problems;
  // Desired streams and consumers that a clustered server's list named in "missing": no leader
  // described them in time (observers::UndescribedObject). Each is an unhealthy entry that was
  // not compared, and one problem names them (so the pass is not converged); the runner
  // retries soon, as it waits for a server that is not ready, without growing a backoff.
  size_t undescribed = 0;
  // Nothing to do and nothing wrong: no drift other than kUnhealthy (information), no action,
  // no problem.
  bool converged() const {
    return std::all_of(drift.begin(), drift.end(),
                       [](const DriftEntry& e) { return e.state == DriftState::kUnhealthy; }) &&
           actions.empty() && problems.empty();
  }
};

// `rendered` is the users file as it should be; ignored when options.users_file_path is empty.
PlanResult Plan(const model::DesiredState& desired, const model::RenderedUsersFile& rendered,
                const observers::ObservedState& observed, const PlanOptions& options);

// The plan for the named streams alone (and the consumers on them): what Plan gives for those
// objects when the desired and observed states are cut down to them. The users file is left
// out (options.users_file_path is ignored); so is every other stream, observed or not, so
// `observed` may hold the named streams only (observers::ObserveStreams). A pass runs it first
// when advisories name owned streams, so that their repair does not wait for the whole
// account's observation.
PlanResult PlanStreams(const model::DesiredState& desired, const observers::ObservedState& observed,
                       const std::set<StreamName>& streams, const PlanOptions& options);

}  // namespace mesh::reconciler
