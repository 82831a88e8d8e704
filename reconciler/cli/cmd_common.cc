// What every subcommand shares: how it reports a usage error or a failure, and the process
// environment it reads secrets from (reconciler/cli/commands.h).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "observers/store_folder.h"
#include "reconciler/base/log.h"
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

std::optional<int> CheckStoreDir(Settings& settings, const char* command) {
  if (settings.store_dir.empty()) return std::nullopt;
  Result<observers::StoreDir> store = observers::InspectStoreDir(settings.store_dir);
  if (!store.ok()) return CommandUsage(command, store.status().message());
  std::string accounts;
  for (const std::string& a : store->accounts) accounts += (accounts.empty() ? "" : ",") + a;
  switch (store->layout) {
    case observers::StoreDirLayout::kStore:
      Log(LogLevel::kInfo, 0, "--store-dir holds the JetStream store",
          {{"store_dir", store->path}, {"accounts", accounts}});
      break;
    case observers::StoreDirLayout::kPrintedFolder:
      Log(LogLevel::kWarn, 0,
          "--store-dir is the folder nats-server prints as its Store Directory; using its parent "
          "(give the parent to silence this)",
          {{"given", settings.store_dir}, {"store_dir", store->path}, {"accounts", accounts}});
      settings.store_dir = store->path;
      break;
    case observers::StoreDirLayout::kNotCreatedYet:
      Log(LogLevel::kInfo, 0,
          "--store-dir holds no JetStream layout yet (a server not started, or no stream yet); "
          "accepted, and checked again at each recreation",
          {{"store_dir", store->path}});
      break;
  }
  return std::nullopt;
}

}  // namespace mesh::reconciler
