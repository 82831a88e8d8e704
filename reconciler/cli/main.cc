// mesh-reconciler: keeps a NATS JetStream bus in line with the mesh's records.
// Dispatches to the subcommands of reconciler/cli/commands.h.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "reconciler/base/log.h"
#include "reconciler/cli/build_info.h"
#include "reconciler/cli/commands.h"
#include "reconciler/cli/completion.h"

namespace {

using mesh::reconciler::Command;

using mesh::reconciler::JsonOutput;

const Command kCommands[] = {
    {"validate", "check a records file and summarise it", mesh::reconciler::kValidateHelp,
     mesh::reconciler::RunValidate, JsonOutput::kOnFlag},
    {"desired", "print the desired streams, consumers and users as JSON",
     mesh::reconciler::kDesiredHelp, mesh::reconciler::RunDesired, JsonOutput::kAlways},
    {"render-users", "render the nats-server users file", mesh::reconciler::kRenderUsersHelp,
     mesh::reconciler::RunRenderUsers, JsonOutput::kNever},
    {"plan", "observe the bus and print the drift and the actions, changing nothing",
     mesh::reconciler::kPlanHelp, mesh::reconciler::RunPlan, JsonOutput::kOnFlag},
    {"reconcile", "one pass now (--once), or ask a running daemon for one (--remote)",
     mesh::reconciler::kReconcileHelp, mesh::reconciler::RunReconcile, JsonOutput::kOnFlag},
    {"run", "the daemon: a woken reconcile loop with metrics and admin endpoints",
     mesh::reconciler::kRunHelp, mesh::reconciler::RunDaemon, JsonOutput::kNever},
    {"hold", "ask a running daemon to observe only, for a while", mesh::reconciler::kHoldHelp,
     mesh::reconciler::RunHold, JsonOutput::kOnFlag},
    {"status", "what a running daemon sees: hold, lease, last pass, drift (no token)",
     mesh::reconciler::kStatusHelp, mesh::reconciler::RunStatus, JsonOutput::kOnFlag},
    {"release", "end a hold on a running daemon", mesh::reconciler::kReleaseHelp,
     mesh::reconciler::RunRelease, JsonOutput::kOnFlag},
    {"show-stream", "print one stream's configuration and state as the server answers",
     mesh::reconciler::kShowStreamHelp, mesh::reconciler::RunShowStream, JsonOutput::kOnFlag},
    {"show-consumer", "print one consumer's configuration and state as the server answers",
     mesh::reconciler::kShowConsumerHelp, mesh::reconciler::RunShowConsumer, JsonOutput::kOnFlag},
    {"delete-stream", "delete one of the mesh's streams (--yes), to have it created again",
     mesh::reconciler::kDeleteStreamHelp, mesh::reconciler::RunDeleteStream, JsonOutput::kNever},
    {"delete-consumer", "delete one of the mesh's consumers (--yes), to have it created again",
     mesh::reconciler::kDeleteConsumerHelp, mesh::reconciler::RunDeleteConsumer,
     JsonOutput::kNever},
};

void PrintUsage(std::FILE* out) {
  std::fprintf(
      out,
      "mesh-reconciler %s: keeps a NATS JetStream bus in line with the mesh's records.\n\n"
      "Usage: mesh-reconciler COMMAND [flags]\n"
      "       mesh-reconciler help COMMAND      (or COMMAND --help): the command's flags\n"
      "       mesh-reconciler --version         the version and the source commit\n"
      "       mesh-reconciler completion bash   a bash completion script:\n"
      "                                         source <(mesh-reconciler completion bash)\n\n"
      "Commands:\n",
      MESH_RECONCILER_VERSION);
  for (const auto& command : kCommands) {
    std::fprintf(out, "  %-14s %s\n", command.name, command.summary);
  }
  std::fprintf(out,
               "\nExit codes: 0 success (plan: converged), 1 error, 2 drift found (plan), 64 "
               "usage error.\n");
}

const Command* FindCommand(const std::string& name) {
  for (const auto& candidate : kCommands) {
    if (name == candidate.name) return &candidate;
  }
  return nullptr;
}

int UnknownCommand(const std::string& name) {
  std::fprintf(stderr, "mesh-reconciler: unknown command \"%s\"\n\n", name.c_str());
  PrintUsage(stderr);
  return mesh::reconciler::kExitUsage;
}

int Completion(int argc, char** argv) {
  if (argc != 3 || std::string(argv[2]) != "bash") {
    std::fprintf(stderr, "mesh-reconciler completion: expected the shell: completion bash\n");
    return mesh::reconciler::kExitUsage;
  }
  std::vector<std::string> names;
  for (const auto& command : kCommands) names.emplace_back(command.name);
  std::fputs(mesh::reconciler::BashCompletion(names, mesh::reconciler::DescribeFlags()).c_str(),
             stdout);
  return mesh::reconciler::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return mesh::reconciler::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || (name == "help" && argc == 2)) {
    PrintUsage(stdout);
    return mesh::reconciler::kExitOk;
  }
  if (name == "help") {
    const Command* command = FindCommand(argv[2]);
    if (command == nullptr) return UnknownCommand(argv[2]);
    std::fputs(command->help, stdout);
    return mesh::reconciler::kExitOk;
  }
  if (name == "--version" || name == "version") {
    std::printf("mesh-reconciler %s (commit %s)\n", MESH_RECONCILER_VERSION,
                mesh::reconciler::BuildCommit());
    return mesh::reconciler::kExitOk;
  }
  if (name == "completion") return Completion(argc, argv);
  const Command* command = FindCommand(name);
  if (command == nullptr) return UnknownCommand(name);
  std::vector<std::string> args(argv + 2, argv + argc);
  auto settings = mesh::reconciler::ParseSettings(args, mesh::reconciler::ProcessEnv);
  if (!settings.ok()) {
    return mesh::reconciler::CommandUsage(command->name, settings.status().message());
  }
  if (settings->help) {
    std::fputs(command->help, stdout);
    return mesh::reconciler::kExitOk;
  }
  if (settings->format == mesh::reconciler::OutputFormat::kJson &&
      command->json == JsonOutput::kNever) {
    std::fprintf(stderr,
                 "mesh-reconciler %s: --json: %s prints no report (for its log as JSON: "
                 "--log-format json)\n(see mesh-reconciler %s --help)\n",
                 command->name, command->name, command->name);
    return mesh::reconciler::kExitUsage;
  }
  mesh::reconciler::ConfigureLogging(mesh::reconciler::ParseLogLevel(settings->log_level),
                                     settings->log_format == "json"
                                         ? mesh::reconciler::LogFormat::kJson
                                         : mesh::reconciler::LogFormat::kLogfmt);
  try {
    return command->run(*settings);
  } catch (const std::exception& e) {
    // A bug: exceptions are not used for expected failures.
    std::fprintf(stderr, "mesh-reconciler %s: internal error: %s\n", command->name, e.what());
    return mesh::reconciler::kExitError;
  }
}
