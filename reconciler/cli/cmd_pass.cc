// plan and reconcile: one pass from the command line. `plan` observes and changes nothing;
// `reconcile --once` applies; `reconcile --remote URL` asks a running daemon (cmd_daemon.cc).
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "reconciler/cli/commands.h"
#include "reconciler/pass/pass.h"

namespace mesh::reconciler {
namespace {

constexpr uint64_t kCliPassId = 1;

// Checks the flags a local pass needs and loads the secrets. Returns an exit code when the
// command cannot go on.
std::optional<int> CheckPassCommand(Settings& settings, const char* command) {
  if (settings.records_path.empty() && settings.positional.size() == 1) {
    settings.records_path = settings.positional.front();
    settings.positional.clear();
  }
  std::string problem;
  if (!settings.positional.empty())
    problem = "unexpected argument \"" + settings.positional[0] + "\"";
  else if (settings.records_path.empty())
    problem = "--records is required";
  else if (settings.bus.urls.empty())
    problem = "--bus is required";
  if (!problem.empty()) return CommandUsage(command, problem);
  if (Status secrets = LoadSecrets(settings, ProcessEnv); !secrets.ok()) {
    return CommandFail(command, secrets.message());
  }
  return std::nullopt;
}

// The report, which says a failed pass's error in its last line ("error: ..."). The error is
// said once: on stderr too only under --json, whose output is for a program, not for the person
// reading the terminal (the pass's own "pass failed" log line is the daemon's: a kOnce pass
// does not log it).
void Print(const PassReport& report, const Settings& settings, const char* command) {
  if (settings.format == OutputFormat::kJson) {
    std::fputs(ReportToJson(report).c_str(), stdout);
    if (!report.status.ok()) {
      std::fprintf(stderr, "mesh-reconciler %s: %s\n", command, report.status.ToString().c_str());
    }
  } else {
    std::fputs(FormatReportTable(report).c_str(), stdout);
  }
}

}  // namespace

const char* const kPlanHelp =
    R"(Usage: mesh-reconciler plan --records FILE --bus URL [flags]

Observes the bus (streams, consumers), the users file and the server, and prints the drift
(KIND NAME STATE REMEDY DETAILS) and the actions a reconcile would take. Changes nothing.
--json (or -o json): the report as JSON (docs/schemas/report.v1.schema.json).

Exit codes: 0 converged, 2 drift found, 1 error (records invalid, bus unreachable, server not
ready), 64 usage error.
)";

const char* const kReconcileHelp =
    R"(Usage: mesh-reconciler reconcile --once --records FILE --bus URL [flags]
       mesh-reconciler reconcile --remote URL [--token-file FILE] [--ca-file FILE] [--json]

--once: one pass here and now: observe, plan, apply (create, update in place, rewrite the users
file and reload the server; delete only with --prune), observe again, and print what was done
and what remains.
--remote URL: ask a running daemon (mesh-reconciler run) for a pass and print its report; with
an https:// --remote, --ca-file is the CA that must have issued the daemon's certificate
(without it, the system's CAs).

Exit codes: 0 converged afterwards, 2 drift remains (e.g. report-only differences, unexpected
objects left alone, unsatisfiable records), 1 error (a failed or refused action, records
invalid, bus unreachable, server not ready), 64 usage error.
)";

int RunPlan(Settings& settings) {
  if (auto exit = CheckPassCommand(settings, "plan")) return *exit;
  Reconciler reconciler(settings);
  PassReport report = reconciler.RunPass(kCliPassId, Trigger::kOnce, ApplyMode::kObserveOnly);
  Print(report, settings, "plan");
  if (!report.status.ok()) return kExitError;
  return report.converged() ? kExitOk : kExitDrift;
}

int RunReconcile(Settings& settings) {
  if (!settings.remote.empty()) return RunRemoteReconcile(settings);
  if (!settings.once) {
    std::fprintf(stderr,
                 "mesh-reconciler reconcile: give --once (one pass here) or --remote URL (ask a "
                 "running daemon)\n(see mesh-reconciler reconcile --help)\n");
    return kExitUsage;
  }
  if (auto exit = CheckPassCommand(settings, "reconcile")) return *exit;
  if (auto exit = CheckStoreDir(settings, "reconcile")) return *exit;
  Reconciler reconciler(settings);
  PassReport report = reconciler.RunPass(kCliPassId, Trigger::kOnce, ApplyMode::kApply);
  Print(report, settings, "reconcile");
  if (!report.status.ok() || report.any_action_failed()) return kExitError;
  return report.converged() ? kExitOk : kExitDrift;
}

}  // namespace mesh::reconciler
