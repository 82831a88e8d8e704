// Apply: the only part of a pass that writes. Executes a plan's actions in order (users file,
// then streams, then consumers; creations kept in flight through BusConnection::RequestMany)
// and records each action's outcome. One failed action does not stop the others; a consumer
// whose stream could not be created is skipped, not attempted.
//
// Thread-safety: call from the thread that owns the BusConnection.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "model/enum_names.h"
#include "model/result.h"
#include "observers/bus.h"
#include "observers/process.h"
#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

enum class Outcome { kDone, kRefused, kFailed, kSkipped };
inline constexpr EnumNames<Outcome, 4> kOutcomeNames{{{
    {Outcome::kDone, "done"},
    {Outcome::kRefused, "refused"},
    {Outcome::kFailed, "failed"},
    {Outcome::kSkipped, "skipped"},
}}};
static_assert(kOutcomeNames.Dense());
const char* ToString(Outcome v);  // "done", "refused", "failed", "skipped"

// Why the reload signal was not sent to the PID that nats-server's pid file names.
enum class SignalRefusal {
  kNone,     // sent, or not sent for another reason (no pid file, no PID in it)
  kStale,    // no such process (or one that has exited): the server is gone, its pid file left
  kForeign,  // a running process that is not nats-server (this process included): a reused PID
};
inline constexpr EnumNames<SignalRefusal, 3> kSignalRefusalNames{{{
    {SignalRefusal::kNone, "none"},
    {SignalRefusal::kStale, "stale"},
    {SignalRefusal::kForeign, "foreign"},
}}};
static_assert(kSignalRefusalNames.Dense());
const char* ToString(SignalRefusal v);  // "none", "stale", "foreign" (metric label values)

struct ActionOutcome {
  Action action;
  Outcome outcome = Outcome::kDone;
  int err_code = 0;    // JetStream err_code when refused (e.g. 10052)
  std::string detail;  // the server's text, or why skipped/failed; no secrets
  // kReloadServer: why no signal went out (mesh_reconciler_reload_signals_refused_total).
  SignalRefusal signal_refusal = SignalRefusal::kNone;
};

// Asked before each chunk of JetStream actions is sent: whether this instance may still act on
// JetStream objects (with --lease: it still holds the lease, renewed by the hook when due). An
// empty value gets `kSend` for every chunk. Returning kStop skips every remaining JetStream
// action ("not sent: ..." with the reason); the users-file actions are not affected.
enum class ChunkVerdict { kSend, kStop };
struct ChunkDecision {
  ChunkVerdict verdict = ChunkVerdict::kSend;
  std::string reason;  // kStop: why, for the skipped actions' detail
};
using BeforeChunk = std::function<ChunkDecision()>;

struct ApplyTargets {
  observers::BusConnection* bus = nullptr;  // not owned; may be null when only the file is acted on
  std::string users_file_path;
  std::string pid_file;     // nats-server's pid file: SIGHUP to reload
  std::string monitor_url;  // to confirm the reload through /varz config_load_time
  std::chrono::milliseconds reload_timeout{10000};
  BeforeChunk before_chunk;  // lease fencing; empty: always send
};

// The outcome of one JetStream action from the server's reply: kFailed when no answer came (the
// transport's status), kRefused with the server's err_code and words when it answered an error,
// kFailed when a deletion's answer does not confirm it; kDone otherwise. Pure.
ActionOutcome OutcomeOf(Action action, const observers::ApiReply& reply);

// Takes the actions by value: each moves into its outcome (a first convergence can hold
// thousands, each with its spec), so pass an rvalue when the caller keeps no copy.
std::vector<ActionOutcome> Apply(std::vector<Action> actions, const ApplyTargets& targets);

// The users-file steps, exposed for tests and `render-users --out`:
// temporary file in the same folder, mode 0600, write, fsync, rename, fsync the folder.
// On failure the old file is untouched and the temporary file removed.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);
// What SignalReload did: the PID it read (0 when none) and, when it sent nothing, why.
struct ReloadSignal {
  Status status;
  pid_t pid = 0;
  SignalRefusal refusal = SignalRefusal::kNone;
};
// SIGHUP to the nats-server whose PID is in `pid_file`. Nothing is sent, and the status says
// why, when the file is absent or holds no PID, when no process has that PID (kStale), or when
// the process is not nats-server (kForeign: its program, argv[0] or /proc/<pid>/exe, is not
// named nats-server; or it is this very process).
ReloadSignal SignalReload(const std::string& pid_file);
// Whether `process` may be sent nats-server's reload signal: kNone when it is a running
// nats-server other than `self`; `why` says what it is otherwise. Pure.
SignalRefusal CheckServerProcess(const observers::ProcessInfo& process, pid_t self,
                                 std::string* why);
// Waits until /varz config_load_time is later than `before_unix_ns`; an error on timeout
// ("reload not confirmed") or when the monitor is unreachable.
Status ConfirmReload(const std::string& monitor_url, int64_t before_unix_ns,
                     std::chrono::milliseconds timeout);

}  // namespace mesh::reconciler
