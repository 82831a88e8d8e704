// Command-line settings shared by every subcommand: the same flag names everywhere, each also
// read from the environment as MESH_RECONCILER_<NAME> (upper case, '-' -> '_'), for Kubernetes.
// A flag on the command line wins over the environment. Secrets never come from a flag's value:
// the password from MESH_RECONCILER_PASSWORD or --password-file, the bus certificate from
// MESH_BROKER_CERTIFICATE.
//
// Why a table of our own and not CLI11 (Debian 12's libcli11-dev 2.1.2), which has flags with an
// environment fallback: CLI11 reads the process environment itself (std::getenv in
// App::_process_env), where ParseSettings reads it through the `getenv` it is given, so that
// the tests parse any environment without touching the process's; and CLI11 takes a variable
// set to the empty string for one not set, where a MESH_RECONCILER_BUS= left empty in a pod spec
// must be an error ("--bus: no URL given"), not the default. The help texts are ours either way
// (each command's usage and flags, the man page, the completions, all from this table and
// main.cc's command table), and the values are checked by the same functions, so CLI11 would
// replace the loop over the arguments only; and CLI11 2.1.2 generates no zsh or fish completion
// and no man page, which the table does.
//
// Thread-safety: plain values. ParseSettings reads the environment through `getenv`.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "model/result.h"
#include "reconciler/pass/pass_settings.h"

namespace mesh::reconciler {

enum class OutputFormat { kTable, kJson };
// --yes: a deletion by hand is confirmed. Only from the command line, never the environment: a
// variable left in a shell or a pod spec must not confirm every deletion after it.
enum class Confirm { kNo, kYes };

// The pass's settings (PassSettings: records, bus, users file, prune, lease, bcrypt cost, users
// scope, interval) and the commands' own. A Reconciler is given the PassSettings part.
struct Settings : PassSettings {
  std::string password_file;                   // --password-file (read by LoadSecrets)
  OutputFormat format = OutputFormat::kTable;  // --json, -o json
  std::string out;                             // --out FILE (render-users)
  // Daemon.
  std::string listen = "127.0.0.1:9464";  // --listen HOST:PORT
  std::string token_file;                 // --token-file
  // --advisory-floor: least time between two advisory-woken passes (0 allowed).
  std::chrono::milliseconds advisory_floor{100};
  // --http-connections: the listener's connection cap (HttpServerOptions::max_connections);
  // forced requests may wait on all of it but one address's share.
  size_t http_connections = 256;
  // --http-connections-per-client: one address's cap
  // (HttpServerOptions::max_connections_per_client), at most http_connections.
  size_t http_connections_per_client = 64;
  std::string tls_cert_file;          // --tls-cert (HTTP listener)
  std::string tls_key_file;           // --tls-key
  std::string log_level = "info";     // --log-level debug|info|warn|error
  std::string log_format = "logfmt";  // --log-format logfmt|json
  // On-call.
  std::string remote;                                  // --remote http://127.0.0.1:9464
  std::chrono::milliseconds hold_for{30 * 60 * 1000};  // --for 30m
  std::string reason;              // --reason "restoring DECL from backup" (hold, release)
  std::string hold_scope;          // --scope bus|pod (hold); empty: the daemon's default
  Confirm confirm = Confirm::kNo;  // --yes (delete-stream, delete-consumer)
  bool once = false;               // --once
  bool help = false;               // --help / -h
  std::vector<std::string> positional;
};

using GetEnv = std::function<const char*(const char*)>;

// Whether a flag takes a value ("--records FILE") or is a switch ("--json").
enum class FlagArity { kSwitch, kValue };
// What shell completion offers for a flag's value.
enum class FlagValues {
  kNone,       // free text (a URL, a duration, a name): nothing offered
  kFile,       // a file name
  kDirectory,  // a directory name
  kWords,      // one of `words`
};
struct FlagDescription {
  std::string name;  // without the leading "--"
  FlagArity arity;
  std::string metavar;             // the value's name in help ("FILE"); empty for a switch
  FlagValues values;               // what completion offers for the value
  std::vector<std::string> words;  // kWords: the values accepted
  std::string help;                // the default description, '\n' between lines
  std::string env;                 // MESH_RECONCILER_<NAME>, empty when never read from there
};
// Every flag ParseSettings accepts, sorted by name: the one table behind the parser, each
// command's --help, shell completion and the man page, so that none of them can name a flag
// the others lack. Each command accepts a subset (main.cc's command table).
std::vector<FlagDescription> DescribeFlags();

// Parses flags (both "--name value" and "--name=value"; "-h" is --help, "-o json" --output
// json). Unknown flags, flags not in `accepted`, a missing value and a value that looks like a
// flag ("--records --bus ...") are errors; after "--" every argument is an operand. The
// environment is read for the accepted flags only.
Result<Settings> ParseSettings(const std::vector<std::string>& args, const GetEnv& getenv,
                               const std::vector<std::string>& accepted);
// The same, accepting every flag.
Result<Settings> ParseSettings(const std::vector<std::string>& args, const GetEnv& getenv);

// Reads the password (MESH_RECONCILER_PASSWORD, else --password-file, trailing newline
// stripped) and MESH_BROKER_CERTIFICATE into settings.bus. Errors name the file, never content.
Status LoadSecrets(Settings& settings, const GetEnv& getenv);

// The password in --password-file as LoadSecrets reads it (trailing newline stripped), for the
// daemon to read again when the file is rotated. Errors name the file, never content.
Result<std::string> ReadPasswordFile(const std::string& path);

// Joins string literals at compile time, for help texts that include kPassSettingsHelpText:
//   constexpr auto kText = JoinText("Usage: ...\n", kPassSettingsHelpText);
//   const char* const kHelp = kText.data();  // constant-initialised
template <size_t... N>
constexpr std::array<char, (N + ... + 0) - sizeof...(N) + 1> JoinText(const char (&... parts)[N]) {
  std::array<char, (N + ... + 0) - sizeof...(N) + 1> out{};
  size_t at = 0;
  auto append = [&](const char* part, size_t size) {
    for (size_t i = 0; i + 1 < size; ++i) out[at++] = part[i];
  };
  (append(parts, N), ...);
  return out;
}

}  // namespace mesh::reconciler
