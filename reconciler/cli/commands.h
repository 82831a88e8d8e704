// The subcommands of the mesh-reconciler binary. Each takes parsed settings and returns the
// process exit code; each prints its own --help. main.cc only dispatches.
//
// Exit codes: 0 success / converged, 1 error, 2 drift found (plan), 64 usage error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "reconciler/cli/settings.h"

namespace mesh::reconciler {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitDrift = 2;
inline constexpr int kExitUsage = 64;

// What --json means to a command. Every output a program may read has a schema
// (docs/schemas/); a command whose output has none refuses --json rather than ignore it.
enum class JsonOutput {
  kOnFlag,  // --json switches the output to JSON (a table or a line otherwise)
  kAlways,  // the output is JSON anyway (desired); --json is accepted
  kNever,   // not a report (a users file, a daemon's log): --json is a usage error
};

// cmd_common.cc. "mesh-reconciler COMMAND: MESSAGE" on stderr; returns kExitError.
int CommandFail(const char* command, const std::string& message);
// The same with "(see mesh-reconciler COMMAND --help)"; returns kExitUsage.
int CommandUsage(const char* command, const std::string& message);
// std::getenv, as a GetEnv for ParseSettings and LoadSecrets.
const char* ProcessEnv(const char* name);
// --store-dir, checked before a command that repairs (run, reconcile --once) starts: a folder
// without nats-server's JetStream layout is a usage error (the message says what was expected
// and found); the folder nats-server prints ("Store Directory", <store_dir>/jetstream) is
// replaced by its parent, logged. Returns an exit code when the command cannot go on.
std::optional<int> CheckStoreDir(Settings& settings, const char* command);

// What a command takes besides flags; main.cc refuses a stray or missing one (exit 64).
enum class Operands {
  kNone,           // none
  kRecords,        // [RECORDS]: the records file, in place of --records (completed as a file)
  kStream,         // NAME: a stream's
  kStreamAndName,  // STREAM NAME: a consumer's
};

// One flag of a command: a name of DescribeFlags(), and this command's own description of it
// when the table's does not fit (show-stream's --records is not delete-stream's).
struct CommandFlag {
  const char* name;
  const char* help = nullptr;  // nullptr: DescribeFlags()'s
};

// A command: the one table behind its --help (the prose, then its flags), the parser (only its
// flags, from the command line and the environment), shell completion and the man page.
struct Command {
  const char* name;
  const char* summary;  // one line, for the top-level usage
  const char* help;     // the --help text before the flags: usage, what it does, exit codes
  int (*run)(Settings& settings);
  JsonOutput json;
  Operands operands;
  std::vector<CommandFlag> flags;  // in the order --help lists them; -h/--help is added
};

// help.cc. The command's --help: its prose, then "Flags:" with each flag's description.
std::string CommandHelp(const Command& command);
// The flag's description as this command gives it.
FlagDescription DescribeFlagFor(const Command& command, const CommandFlag& flag);
// The names of the command's flags, --help included (what ParseSettings accepts for it).
std::vector<std::string> FlagNames(const Command& command);
// The manual page (roff, man(7)) of every command and flag, from the same table as --help.
std::string ManPage(const std::vector<Command>& commands, const std::string& version_line);

inline constexpr const char* kValidationSchema = "mesh-reconciler/validation/v1";

// cmd_model.cc: validate, desired, render-users.
int RunValidate(Settings& settings);
int RunDesired(Settings& settings);
int RunRenderUsers(Settings& settings);
extern const char* const kValidateHelp;
extern const char* const kDesiredHelp;
extern const char* const kRenderUsersHelp;

// cmd_pass.cc: plan, reconcile (--once here; --remote delegates to RunRemoteReconcile).
int RunPlan(Settings& settings);
int RunReconcile(Settings& settings);
extern const char* const kPlanHelp;
extern const char* const kReconcileHelp;

// cmd_daemon.cc: run, and the on-call commands that talk to a running daemon.
int RunDaemon(Settings& settings);
int RunRemoteReconcile(Settings& settings);
int RunHold(Settings& settings);
int RunRelease(Settings& settings);
extern const char* const kRunHelp;
extern const char* const kHoldHelp;
extern const char* const kReleaseHelp;

// cmd_status.cc: what a running daemon sees (GET /drift, no token).
int RunStatus(Settings& settings);
extern const char* const kStatusHelp;

// cmd_bus.cc: the bus commands of the runbook, in place of the `nats` CLI the image lacks.
int RunShowStream(Settings& settings);
int RunShowConsumer(Settings& settings);
int RunDeleteStream(Settings& settings);
int RunDeleteConsumer(Settings& settings);
extern const char* const kShowStreamHelp;
extern const char* const kShowConsumerHelp;
extern const char* const kDeleteStreamHelp;
extern const char* const kDeleteConsumerHelp;

}  // namespace mesh::reconciler
