// mesh-reconciler: keeps a NATS JetStream bus in line with the mesh's records.
// Dispatches to the subcommands of reconciler/commands.h.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "reconciler/commands.h"
#include "reconciler/log.h"

namespace {

using mesh::reconciler::Command;

const Command kCommands[] = {
    {"validate", "check a records file and summarise it", mesh::reconciler::kValidateHelp,
     mesh::reconciler::RunValidate},
    {"desired", "print the desired streams, consumers and users as JSON",
     mesh::reconciler::kDesiredHelp, mesh::reconciler::RunDesired},
    {"render-users", "render the nats-server users file", mesh::reconciler::kRenderUsersHelp,
     mesh::reconciler::RunRenderUsers},
    {"plan", "observe the bus and print the drift and the actions, changing nothing",
     mesh::reconciler::kPlanHelp, mesh::reconciler::RunPlan},
    {"reconcile", "one pass now (--once), or ask a running daemon for one (--remote)",
     mesh::reconciler::kReconcileHelp, mesh::reconciler::RunReconcile},
    {"run", "the daemon: a woken reconcile loop with metrics and admin endpoints",
     mesh::reconciler::kRunHelp, mesh::reconciler::RunDaemon},
    {"hold", "ask a running daemon to observe only, for a while", mesh::reconciler::kHoldHelp,
     mesh::reconciler::RunHold},
    {"release", "end a hold on a running daemon", mesh::reconciler::kReleaseHelp,
     mesh::reconciler::RunRelease},
};

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "mesh-reconciler %s: keeps a NATS JetStream bus in line with the mesh's records.\n\n"
               "Usage: mesh-reconciler COMMAND [flags]   (mesh-reconciler COMMAND --help)\n\n"
               "Commands:\n",
               MESH_RECONCILER_VERSION);
  for (const auto& command : kCommands) {
    std::fprintf(out, "  %-14s %s\n", command.name, command.summary);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return mesh::reconciler::kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(stdout);
    return mesh::reconciler::kExitOk;
  }
  if (name == "--version" || name == "version") {
    std::printf("mesh-reconciler %s\n", MESH_RECONCILER_VERSION);
    return mesh::reconciler::kExitOk;
  }
  const Command* command = nullptr;
  for (const auto& candidate : kCommands) {
    if (name == candidate.name) command = &candidate;
  }
  if (command == nullptr) {
    std::fprintf(stderr, "mesh-reconciler: unknown command \"%s\"\n\n", name.c_str());
    PrintUsage(stderr);
    return mesh::reconciler::kExitUsage;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  auto settings =
      mesh::reconciler::ParseSettings(args, [](const char* n) { return std::getenv(n); });
  if (!settings.ok()) {
    std::fprintf(stderr, "mesh-reconciler %s: %s\n(see mesh-reconciler %s --help)\n", command->name,
                 settings.status().message().c_str(), command->name);
    return mesh::reconciler::kExitUsage;
  }
  if (settings->help) {
    std::fputs(command->help, stdout);
    return mesh::reconciler::kExitOk;
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
