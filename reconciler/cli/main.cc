// mesh-reconciler: keeps a NATS JetStream bus in line with the mesh's records.
// Dispatches to the subcommands of reconciler/cli/commands.h.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <string>
#include <vector>

#include "reconciler/base/log.h"
#include "reconciler/cli/build_info.h"
#include "reconciler/cli/commands.h"
#include "reconciler/cli/completion.h"

namespace {

using mesh::reconciler::Command;

using mesh::reconciler::JsonOutput;

using mesh::reconciler::CommandFlag;
using mesh::reconciler::Operands;

using Flags = std::vector<CommandFlag>;

Flags Concat(std::initializer_list<Flags> parts) {
  Flags out;
  for (const Flags& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

// The flags that the commands share, in the order --help lists them.
Flags BusFlags() {
  return {{"bus"}, {"user"}, {"password-file"}, {"ca-file"}};
}
Flags PassFlagsButBus() {
  return {{"users-file"}, {"users-scope"}, {"pid-file"},    {"monitor"}, {"store-dir"},
          {"prune"},      {"lease"},       {"bcrypt-cost"}, {"rehash"}};
}
Flags PassFlags() {
  return Concat({Flags{{"records"}}, BusFlags(), PassFlagsButBus()});
}
// The bus commands take the other pass settings too, unused, so that one set of flags (or the
// sidecar's environment) serves plan and them alike.
Flags UnusedPassFlags() {
  Flags out = PassFlagsButBus();
  for (CommandFlag& flag : out)
    flag.help = "a pass setting, accepted as plan takes it; not used here";
  return out;
}
Flags LogFlags() {
  return {{"log-level"}, {"log-format"}};
}
Flags JsonFlags() {
  return {{"json"}, {"output"}};
}

constexpr const char* kRemoteCaFile =
    "https: trust only this CA (PEM) for the daemon's certificate, which\n"
    "must name the URL's host; without it, the system's CAs";
constexpr const char* kShowRecords =
    "the records: names the mesh, to say whether the object carries its\n"
    "ownership mark (without it, not said)";
constexpr const char* kDeleteRecords =
    "the records: names the mesh whose ownership mark the stream must\n"
    "carry to be deleted (required)";

// Every command, its flags and its operands: the one table behind the parser (each command
// accepts its own flags only, from the command line and the environment), --help, shell
// completion and the man page (reconciler/cli/help.cc, completion.cc).
const std::vector<Command>& Commands() {
  static const std::vector<Command> commands = {
      {"validate", "check a records file and summarise it", mesh::reconciler::kValidateHelp,
       mesh::reconciler::RunValidate, JsonOutput::kOnFlag, Operands::kRecords,
       Concat({Flags{{"records"}, {"user"}}, JsonFlags()})},
      {"desired", "print the desired streams, consumers and users as JSON",
       mesh::reconciler::kDesiredHelp, mesh::reconciler::RunDesired, JsonOutput::kAlways,
       Operands::kRecords, Concat({Flags{{"records"}, {"user"}}, JsonFlags()})},
      {"render-users",
       "render the nats-server users file",
       mesh::reconciler::kRenderUsersHelp,
       mesh::reconciler::RunRenderUsers,
       JsonOutput::kNever,
       Operands::kRecords,
       {{"records"},
        {"out"},
        {"user"},
        {"password-file"},
        {"bcrypt-cost"},
        {"rehash"},
        {"users-scope"},
        {"lease",
         "the daemon's --lease: the reconciler's user may also publish to the\n"
         "lease's subject"}}},
      {"plan", "observe the bus and print the drift and the actions, changing nothing",
       mesh::reconciler::kPlanHelp, mesh::reconciler::RunPlan, JsonOutput::kOnFlag,
       Operands::kRecords, Concat({PassFlags(), JsonFlags(), LogFlags()})},
      {"reconcile", "one pass now (--once), or ask a running daemon for one (--remote)",
       mesh::reconciler::kReconcileHelp, mesh::reconciler::RunReconcile, JsonOutput::kOnFlag,
       Operands::kRecords,
       Concat({Flags{{"once"},
                     {"remote",
                      "ask the daemon at URL (e.g. http://127.0.0.1:9464) instead;\n"
                      "userinfo, a query or ';' parameters are refused (exit 64)"},
                     {"token-file", "the daemon's admin token (with --remote)"}},
               PassFlags(), JsonFlags(), LogFlags()})},
      {"run", "the daemon: a woken reconcile loop with metrics and admin endpoints",
       mesh::reconciler::kRunHelp, mesh::reconciler::RunDaemon, JsonOutput::kNever, Operands::kNone,
       Concat({PassFlags(),
               Flags{{"listen"},
                     {"token-file"},
                     {"tls-cert"},
                     {"tls-key"},
                     {"interval"},
                     {"advisory-floor"},
                     {"http-connections"},
                     {"http-connections-per-client"}},
               LogFlags()})},
      {"hold",
       "ask a running daemon to observe only, for a while",
       mesh::reconciler::kHoldHelp,
       mesh::reconciler::RunHold,
       JsonOutput::kOnFlag,
       Operands::kNone,
       {{"remote", "the daemon, e.g. http://127.0.0.1:9464 or https://host:9464"},
        {"token-file", "the daemon's admin token"},
        {"ca-file", kRemoteCaFile},
        {"for"},
        {"reason"},
        {"scope"},
        {"json"},
        {"output"}}},
      {"status",
       "what a running daemon sees: hold, lease, last pass, drift (no token)",
       mesh::reconciler::kStatusHelp,
       mesh::reconciler::RunStatus,
       JsonOutput::kOnFlag,
       Operands::kNone,
       {{"remote", "the daemon, e.g. http://127.0.0.1:9464 or https://host:9464"},
        {"ca-file", kRemoteCaFile},
        {"json"},
        {"output"}}},
      {"release",
       "end a hold on a running daemon",
       mesh::reconciler::kReleaseHelp,
       mesh::reconciler::RunRelease,
       JsonOutput::kOnFlag,
       Operands::kNone,
       {{"remote", "the daemon, e.g. http://127.0.0.1:9464 or https://host:9464"},
        {"token-file", "the daemon's admin token"},
        {"ca-file", kRemoteCaFile},
        {"reason", "why (at most 200 bytes, no control characters)"},
        {"json"},
        {"output"}}},
      {"show-stream", "print one stream's configuration and state as the server answers",
       mesh::reconciler::kShowStreamHelp, mesh::reconciler::RunShowStream, JsonOutput::kOnFlag,
       Operands::kStream,
       Concat({Flags{{"records", kShowRecords}}, BusFlags(), UnusedPassFlags(), JsonFlags(),
               LogFlags()})},
      {"show-consumer", "print one consumer's configuration and state as the server answers",
       mesh::reconciler::kShowConsumerHelp, mesh::reconciler::RunShowConsumer, JsonOutput::kOnFlag,
       Operands::kStreamAndName,
       Concat({Flags{{"records", kShowRecords}}, BusFlags(), UnusedPassFlags(), JsonFlags(),
               LogFlags()})},
      {"delete-stream", "delete one of the mesh's streams (--yes), to have it created again",
       mesh::reconciler::kDeleteStreamHelp, mesh::reconciler::RunDeleteStream, JsonOutput::kNever,
       Operands::kStream,
       Concat({Flags{{"yes"}, {"records", kDeleteRecords}}, BusFlags(), UnusedPassFlags(),
               LogFlags()})},
      {"delete-consumer", "delete one of the mesh's consumers (--yes), to have it created again",
       mesh::reconciler::kDeleteConsumerHelp, mesh::reconciler::RunDeleteConsumer,
       JsonOutput::kNever, Operands::kStreamAndName,
       Concat({Flags{{"yes"}, {"records", kDeleteRecords}}, BusFlags(), UnusedPassFlags(),
               LogFlags()})},
  };
  return commands;
}

constexpr const char* kBuiltInHelp =
    R"(Usage: mesh-reconciler completion bash|zsh|fish
       mesh-reconciler man
       mesh-reconciler version

completion SHELL: prints a completion script: each command completes its own flags, the values
of flags that take one of a few words, and file names only where a file is expected.
  bash:  source <(mesh-reconciler completion bash)
         (installed as /usr/share/bash-completion/completions/mesh-reconciler)
  zsh:   mesh-reconciler completion zsh > "${fpath[1]}/_mesh-reconciler"
         (installed as /usr/share/zsh/vendor-completions/_mesh-reconciler)
  fish:  mesh-reconciler completion fish | source
         (installed as /usr/share/fish/vendor_completions.d/mesh-reconciler.fish)
man: prints the manual page (roff): man -l <(mesh-reconciler man).
version (or --version): prints the version and the source commit.

Exit codes: 0 printed, 64 usage error.
)";

void PrintUsage(std::FILE* out) {
  std::fprintf(
      out,
      "mesh-reconciler %s: keeps a NATS JetStream bus in line with the mesh's records.\n\n"
      "Usage: mesh-reconciler COMMAND [flags]\n"
      "       mesh-reconciler help COMMAND      (or COMMAND --help): the command's flags\n"
      "       mesh-reconciler --version         the version and the source commit\n"
      "       mesh-reconciler completion SHELL  a completion script for bash, zsh or fish:\n"
      "                                         source <(mesh-reconciler completion bash)\n"
      "       mesh-reconciler man               the manual page: man -l <(mesh-reconciler man)\n\n"
      "Commands:\n",
      MESH_RECONCILER_VERSION);
  for (const auto& command : Commands()) {
    std::fprintf(out, "  %-14s %s\n", command.name, command.summary);
  }
  std::fprintf(out,
               "\nExit codes: 0 success (plan: converged), 1 error, 2 drift found (plan), 64 "
               "usage error.\n");
}

const Command* FindCommand(const std::string& name) {
  for (const auto& candidate : Commands()) {
    if (name == candidate.name) return &candidate;
  }
  return nullptr;
}

int UnknownCommand(const std::string& name) {
  std::fprintf(stderr, "mesh-reconciler: unknown command \"%s\"\n\n", name.c_str());
  PrintUsage(stderr);
  return mesh::reconciler::kExitUsage;
}

bool IsHelp(const std::string& arg) {
  return arg == "--help" || arg == "-h";
}

// completion, man, version: no flags but --help.
int BuiltInUsage(const char* name, const std::string& message) {
  std::fprintf(stderr, "mesh-reconciler %s: %s\n(see mesh-reconciler %s --help)\n", name,
               message.c_str(), name);
  return mesh::reconciler::kExitUsage;
}

int Completion(const std::vector<std::string>& args) {
  if (args.size() == 1 && IsHelp(args[0])) {
    std::fputs(kBuiltInHelp, stdout);
    return mesh::reconciler::kExitOk;
  }
  if (args.size() != 1) {
    return BuiltInUsage("completion", "expected the shell: completion bash|zsh|fish");
  }
  if (args[0] == "bash") {
    std::fputs(mesh::reconciler::BashCompletion(Commands()).c_str(), stdout);
  } else if (args[0] == "zsh") {
    std::fputs(mesh::reconciler::ZshCompletion(Commands()).c_str(), stdout);
  } else if (args[0] == "fish") {
    std::fputs(mesh::reconciler::FishCompletion(Commands()).c_str(), stdout);
  } else {
    return BuiltInUsage("completion",
                        "unknown shell \"" + args[0] + "\": completion bash|zsh|fish");
  }
  return mesh::reconciler::kExitOk;
}

std::string VersionLine() {
  return std::string("mesh-reconciler ") + MESH_RECONCILER_VERSION + " (commit " +
         mesh::reconciler::BuildCommit() + ")";
}

// version and man: nothing but --help.
int NoArguments(const char* name, const std::vector<std::string>& args, const std::string& text) {
  if (args.size() == 1 && IsHelp(args[0])) {
    std::fputs(kBuiltInHelp, stdout);
    return mesh::reconciler::kExitOk;
  }
  if (!args.empty()) {
    return BuiltInUsage(
        name, (args[0].rfind('-', 0) == 0 ? "unknown flag " : "unexpected argument ") + args[0]);
  }
  std::fputs(text.c_str(), stdout);
  return mesh::reconciler::kExitOk;
}

// Operands: the records operand stands for --records (typed, it wins over the environment's);
// names must be there, and nothing else may be.
int CheckOperands(const Command& command, mesh::reconciler::Settings& settings) {
  std::vector<std::string>& operands = settings.positional;
  size_t least = 0;
  size_t most = 0;
  const char* expected = "";
  switch (command.operands) {
    case Operands::kNone:
      break;
    case Operands::kRecords:
      most = 1;
      break;
    case Operands::kStream:
      least = most = 1;
      expected = "expected the stream's name";
      break;
    case Operands::kStreamAndName:
      least = most = 2;
      expected = "expected the stream's name and the consumer's";
      break;
  }
  if (operands.size() > most) {
    return mesh::reconciler::CommandUsage(command.name,
                                          "unexpected argument \"" + operands[most] + "\"");
  }
  if (operands.size() < least) return mesh::reconciler::CommandUsage(command.name, expected);
  if (command.operands == Operands::kRecords && !operands.empty()) {
    settings.records_path = operands.front();
    operands.clear();
  }
  return mesh::reconciler::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return mesh::reconciler::kExitUsage;
  }
  const std::string name = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (IsHelp(name) || (name == "help" && args.empty())) {
    PrintUsage(stdout);
    return mesh::reconciler::kExitOk;
  }
  if (name == "help") {
    if (args.size() != 1) return BuiltInUsage("help", "expected one command: help COMMAND");
    if (args[0] == "completion" || args[0] == "man" || args[0] == "version") {
      std::fputs(kBuiltInHelp, stdout);
      return mesh::reconciler::kExitOk;
    }
    const Command* command = FindCommand(args[0]);
    if (command == nullptr) return UnknownCommand(args[0]);
    std::fputs(mesh::reconciler::CommandHelp(*command).c_str(), stdout);
    return mesh::reconciler::kExitOk;
  }
  if (name == "--version" || name == "version") {
    return NoArguments("version", args, VersionLine() + "\n");
  }
  if (name == "man") {
    return NoArguments("man", args, mesh::reconciler::ManPage(Commands(), VersionLine()));
  }
  if (name == "completion") return Completion(args);
  const Command* command = FindCommand(name);
  if (command == nullptr) return UnknownCommand(name);
  auto settings = mesh::reconciler::ParseSettings(args, mesh::reconciler::ProcessEnv,
                                                  mesh::reconciler::FlagNames(*command));
  if (!settings.ok()) {
    std::string message = settings.status().message();
    if (command->json == JsonOutput::kNever &&
        (message.find("--json is not") != std::string::npos ||
         message.find("-o is not") != std::string::npos ||
         message.find("--output is not") != std::string::npos)) {
      // A report's JSON is asked of a command that prints none.
      message += " (" + std::string(command->name) +
                 " prints no report; for its log as JSON: --log-format json)";
    }
    return mesh::reconciler::CommandUsage(command->name, message);
  }
  if (settings->help) {
    std::fputs(mesh::reconciler::CommandHelp(*command).c_str(), stdout);
    return mesh::reconciler::kExitOk;
  }
  if (int exit = CheckOperands(*command, *settings); exit != mesh::reconciler::kExitOk) {
    return exit;
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
