// What every subcommand shares: how it reports a usage error or a failure, and the process
// environment it reads secrets from (reconciler/cli/commands.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "reconciler/cli/commands.h"

namespace mesh::reconciler {

int CommandFail(const char* command, const std::string& message) {
  std::fprintf(stderr, "mesh-reconciler %s: %s\n", command, message.c_str());
  return kExitError;
}

int CommandUsage(const char* command, const std::string& message) {
  std::fprintf(stderr, "mesh-reconciler %s: %s\n(see mesh-reconciler %s --help)\n", command,
               message.c_str(), command);
  return kExitUsage;
}

const char* ProcessEnv(const char* name) {
  return std::getenv(name);
}

}  // namespace mesh::reconciler
