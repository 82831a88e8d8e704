#include "reconciler/cli/settings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <map>
#include <optional>
#include <sstream>

#include "model/enum_names.h"
#include "model/users_file.h"
#include "observers/regular_file.h"
#include "observers/url.h"
#include "reconciler/base/duration.h"
#include "reconciler/base/log.h"
#include "reconciler/http/daemon_view.h"

namespace mesh::reconciler {
namespace {

// `v` as a whole number from `lo` to `hi`, nothing around it; nullopt otherwise.
template <typename T>
std::optional<T> WholeNumberIn(const std::string& v, T lo, T hi) {
  T n{};
  const char* end = v.data() + v.size();
  const auto [stop, error] = std::from_chars(v.data(), end, n);
  if (v.empty() || error != std::errc() || stop != end || n < lo || n > hi) return std::nullopt;
  return n;
}

enum class FlagKind { kString, kSwitch };

struct FlagSpec {
  FlagKind kind;
  const char* metavar;             // the value's name in help ("FILE"); empty for a switch
  FlagValues values;               // what completion offers for the value
  std::vector<std::string> words;  // kWords: the values (the setter checks them)
  const char* help;                // the default description, '\n' between lines
  // Stores the value; returns an error message or empty.
  std::function<std::string(Settings&, const std::string&)> set;
};

// The bus is spoken to in NATS (nats://, or tls:// for TLS from the first byte). An http://
// address is the monitoring endpoint's (--monitor), and cnats would take a bare HOST:PORT as
// nats:// silently, so a URL names its scheme. Called after userinfo and queries are refused,
// so the URL may be shown.
std::string BusSchemeProblem(const std::string& url) {
  std::string lower;
  for (char c : url) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("nats://", 0) == 0 || lower.rfind("tls://", 0) == 0) return {};
  const size_t scheme_end = lower.find("://");
  if (lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0) {
    return "--bus " + url + ": the bus speaks NATS, not HTTP: give nats://" +
           url.substr(scheme_end + 3) +
           " (an http:// address on port 8222 is the monitoring endpoint: --monitor)";
  }
  if (scheme_end == std::string::npos) {
    return "--bus " + url + ": give the scheme: nats://" + url + " (or tls://" + url + " for TLS)";
  }
  return "--bus " + url + ": the scheme must be nats:// or tls://";
}

// An address must be a plain scheme://host:port (a path only where the scheme has one): any
// other part may carry a secret, so it is refused, named, and the URL never shown.
std::string AddressProblem(const std::string& flag, const std::string& url,
                           observers::UrlPath path) {
  const std::optional<std::string> part = observers::RefusedUrlPart(url, path);
  if (!part) return {};
  return flag + ": " + *part +
         " in a URL is refused (it may carry a credential; the URL is not shown)";
}

// --monitor and --remote: http:// or https://, host, port and a path; empty is "not set".
std::string HttpAddressProblem(const std::string& flag, const std::string& url) {
  if (url.empty()) return {};
  if (std::string problem = AddressProblem(flag, url, observers::UrlPath::kAllowed);
      !problem.empty()) {
    return problem + "; give http://HOST:PORT or https://HOST:PORT";
  }
  if (url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return flag + ": the scheme must be http:// or https:// (e.g. http://127.0.0.1:" +
           (flag == "--monitor" ? "8222)" : "9464)");
  }
  return {};
}

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string SetString(std::string& target, const std::string& value) {
  target = value;
  return {};
}

const std::map<std::string, FlagSpec>& Flags() {
  static const std::map<std::string, FlagSpec> flags = {
      {"records",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "the records file (JSON, contract version 1)",
        [](Settings& s, const std::string& v) { return SetString(s.records_path, v); }}},
      {"bus",
       {FlagKind::kString,
        "URL[,URL...]",
        FlagValues::kNone,
        {},
        "nats://host:port (or tls://) of the bus: scheme, host and port only\n(userinfo, a path, a "
        "query or ';' parameters are refused, exit 64)",
        [](Settings& s, const std::string& v) -> std::string {
          s.bus.urls = SplitCommaList(v);
          if (s.bus.urls.empty()) return "--bus: no URL given";
          for (const auto& url : s.bus.urls) {
            if (std::string problem = AddressProblem("--bus", url, observers::UrlPath::kRefused);
                !problem.empty()) {
              return problem +
                     "; give nats://HOST:PORT, the user and password in --user and "
                     "MESH_RECONCILER_PASSWORD or --password-file";
            }
            if (std::string problem = BusSchemeProblem(url); !problem.empty()) return problem;
          }
          return {};
        }}},
      {"user",
       {FlagKind::kString,
        "NAME",
        FlagValues::kNone,
        {},
        "the reconciler's own user (default mesh-reconciler)",
        [](Settings& s, const std::string& v) { return SetString(s.bus.user, v); }}},
      {"password-file",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "its password (or MESH_RECONCILER_PASSWORD)",
        [](Settings& s, const std::string& v) { return SetString(s.password_file, v); }}},
      {"users-file",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "the users file nats-server includes (written atomically, mode 0600);\nwithout it the "
        "reconciler acts on JetStream only",
        [](Settings& s, const std::string& v) { return SetString(s.users_file, v); }}},
      {"users-scope",
       {FlagKind::kString, "SCOPE", FlagValues::kWords, WordsOf(model::kUsersScopeNames),
        "server (default): the file is the whole accounts block; account: only\nthe mesh's account "
        "entry, to include inside your own accounts block",
        [](Settings& s, const std::string& v) -> std::string {
          std::optional<model::UsersScope> scope = model::kUsersScopeNames.Parse(v);
          if (!scope) return "--users-scope: server or account";
          s.users_scope = *scope;
          return {};
        }}},
      {"pid-file",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "nats-server's pid file (SIGHUP to reload the users file)",
        [](Settings& s, const std::string& v) { return SetString(s.pid_file, v); }}},
      {"monitor",
       {FlagKind::kString,
        "URL",
        FlagValues::kNone,
        {},
        "nats-server's monitoring endpoint, e.g. http://127.0.0.1:8222 (a\npath is allowed, never "
        "logged; userinfo, a query, ';' are refused)",
        [](Settings& s, const std::string& v) -> std::string {
          if (std::string problem = HttpAddressProblem("--monitor", v); !problem.empty()) {
            return problem;
          }
          return SetString(s.monitor_url, v);
        }}},
      {"store-dir",
       {FlagKind::kString,
        "DIR",
        FlagValues::kDirectory,
        {},
        "nats-server's JetStream store_dir, mounted here read-only: on 2.9 a\ndeleted stream is "
        "recreated as soon as its old folder is gone there\n(checked at start: the folder the "
        "server prints is taken as its\nparent; one without jetstream/<account>/streams is "
        "refused, exit 64)",
        [](Settings& s, const std::string& v) { return SetString(s.store_dir, v); }}},
      {"ca-file",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "TLS: trust this CA for the bus\n(MESH_BROKER_CERTIFICATE=PEM pins the bus's own "
        "certificate)",
        [](Settings& s, const std::string& v) { return SetString(s.bus.ca_file, v); }}},
      {"prune",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "delete objects marked as ours that the records no longer derive",
        [](Settings& s, const std::string&) {
          s.prune = Prune::kYes;
          return std::string();
        }}},
      {"lease",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "several reconcilers on one cluster: only the holder of the JetStream\nKV lease acts on "
        "streams and consumers; each keeps its users file",
        [](Settings& s, const std::string&) {
          s.lease = LeaseMode::kKv;
          return std::string();
        }}},
      {"bcrypt-cost",
       {FlagKind::kString,
        "N",
        FlagValues::kNone,
        {},
        "bcrypt cost for plain passwords (default 10, 4 to 31); a users-file\nhash of another "
        "cost that its digest proves is kept, not drift",
        [](Settings& s, const std::string& v) -> std::string {
          const std::optional<int> cost = WholeNumberIn(v, 4, 31);
          if (!cost) return "--bcrypt-cost: expected a whole number from 4 to 31";
          s.bcrypt_cost = *cost;
          return {};
        }}},
      {"rehash",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "hash the users file's hashes of another cost again at --bcrypt-cost\n(plan lists them "
        "as drift without hashing them)",
        [](Settings& s, const std::string&) {
          s.other_costs = model::OtherCostHashes::kRehash;
          return std::string();
        }}},
      {"json",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "machine-readable output (JSON)",
        [](Settings& s, const std::string&) {
          s.format = OutputFormat::kJson;
          return std::string();
        }}},
      {"output",
       {FlagKind::kString,
        "FORMAT",
        FlagValues::kWords,
        {"json"},
        "json: the same as --json (-o json, as kubectl and helm take it)",
        [](Settings& s, const std::string& v) -> std::string {
          if (v != "json") return "--output: json is the only format (the default is a table)";
          s.format = OutputFormat::kJson;
          return {};
        }}},
      {"out",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "write the users file here (atomically, mode 0600) instead of stdout",
        [](Settings& s, const std::string& v) { return SetString(s.out, v); }}},
      {"listen",
       {FlagKind::kString,
        "HOST:PORT",
        FlagValues::kNone,
        {},
        "HTTP listener (default 127.0.0.1:9464; [::1]:9464 for IPv6)",
        [](Settings& s, const std::string& v) -> std::string {
          if (v.rfind(':') == std::string::npos) return "--listen: expected HOST:PORT";
          s.listen = v;
          return {};
        }}},
      {"token-file",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "the admin token for POSTs (re-read when the file changes); a UTF-8\nbyte order mark is "
        "refused, a file readable by others warned about",
        [](Settings& s, const std::string& v) { return SetString(s.token_file, v); }}},
      {"interval",
       {FlagKind::kString,
        "DURATION",
        FlagValues::kNone,
        {},
        "time between periodic passes (default 30s; e.g. 5m, 1h)",
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--interval: " + d.status().message();
          if (d->count() < 100) return "--interval: at least 100ms";
          s.interval = *d;
          return {};
        }}},
      {"advisory-floor",
       {FlagKind::kString,
        "DURATION",
        FlagValues::kNone,
        {},
        "least time between two passes woken by advisories (default 100ms;\n0 for none, at most "
        "1m); only advisories about the mesh's own\nstreams and known consumers wake a pass, never "
        "an ephemeral's",
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--advisory-floor: " + d.status().message();
          if (*d > std::chrono::minutes(1)) return "--advisory-floor: at most 1m";
          s.advisory_floor = *d;
          return {};
        }}},
      {"http-connections",
       {FlagKind::kString,
        "N",
        FlagValues::kNone,
        {},
        "the listener's connection cap (default 256, 128 to 16384); POST\n/reconcile requests "
        "may wait on all but 64 of them (more are\nanswered 503). Each is a file descriptor",
        [](Settings& s, const std::string& v) -> std::string {
          const std::optional<size_t> n = WholeNumberIn<size_t>(v, 128, 16384);
          if (!n) return "--http-connections: expected a whole number from 128 to 16384";
          s.http_connections = *n;
          return {};
        }}},
      {"http-connections-per-client",
       {FlagKind::kString,
        "N",
        FlagValues::kNone,
        {},
        "connections one client address may hold (default 64, 8 to\n16384, at most "
        "--http-connections): at the cap its idle ones are\nevicted, and a new one is closed "
        "when all are busy. Raise it for\na tool that sends many POST /reconcile at once "
        "from one address",
        [](Settings& s, const std::string& v) -> std::string {
          const std::optional<size_t> n = WholeNumberIn<size_t>(v, 8, 16384);
          if (!n) return "--http-connections-per-client: expected a whole number from 8 to 16384";
          s.http_connections_per_client = *n;
          return {};
        }}},
      {"tls-cert",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "serve HTTPS: PEM certificate chain, the server's certificate first",
        [](Settings& s, const std::string& v) { return SetString(s.tls_cert_file, v); }}},
      {"tls-key",
       {FlagKind::kString,
        "FILE",
        FlagValues::kFile,
        {},
        "its PEM private key (unencrypted; keep it mode 0600)",
        [](Settings& s, const std::string& v) { return SetString(s.tls_key_file, v); }}},
      {"log-level",
       {FlagKind::kString, "LEVEL", FlagValues::kWords, WordsOf(kLogLevelNames),
        "debug, info (default), warn or error (logs go to stderr)",
        [](Settings& s, const std::string& v) -> std::string {
          if (!kLogLevelNames.Parse(v)) {
            return "--log-level: expected debug, info, warn or error";
          }
          s.log_level = v;
          return {};
        }}},
      {"log-format",
       {FlagKind::kString,
        "FORMAT",
        FlagValues::kWords,
        {"logfmt", "json"},
        "logfmt (default) or json; one line per event on stderr",
        [](Settings& s, const std::string& v) -> std::string {
          if (v != "logfmt" && v != "json") return "--log-format: logfmt or json";
          s.log_format = v;
          return {};
        }}},
      {"remote",
       {FlagKind::kString,
        "URL",
        FlagValues::kNone,
        {},
        "the daemon, e.g. http://127.0.0.1:9464 or https://host:9464;\nuserinfo, a query or ';' "
        "parameters are refused (exit 64)",
        [](Settings& s, const std::string& v) -> std::string {
          if (std::string problem = HttpAddressProblem("--remote", v); !problem.empty()) {
            return problem;
          }
          return SetString(s.remote, v);
        }}},
      {"for",
       {FlagKind::kString,
        "DURATION",
        FlagValues::kNone,
        {},
        "how long (default 30m, at most 24h; e.g. 30m, 2h)",
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--for: " + d.status().message();
          s.hold_for = *d;
          return {};
        }}},
      {"reason",
       {FlagKind::kString,
        "TEXT",
        FlagValues::kNone,
        {},
        "why, for whoever looks next (at most 200 bytes, no control characters)",
        [](Settings& s, const std::string& v) { return SetString(s.reason, v); }}},
      {"scope",
       {FlagKind::kString,
        "SCOPE",
        FlagValues::kWords,
        {"bus", "pod"},  // the default first
        "bus (the default with --lease): every replica observes only, one\nstarted later too; "
        "pod: this daemon alone",
        [](Settings& s, const std::string& v) -> std::string {
          if (!kHoldScopeNames.Parse(v)) return "--scope: expected bus or pod";
          s.hold_scope = v;
          return "";
        }}},
      {"once",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "run one pass in this process",
        [](Settings& s, const std::string&) {
          s.once = true;
          return std::string();
        }}},
      {"yes",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "required: confirms the deletion (only on the command line)",
        [](Settings& s, const std::string&) {
          s.confirm = Confirm::kYes;
          return std::string();
        }}},
      {"help",
       {FlagKind::kSwitch,
        "",
        FlagValues::kNone,
        {},
        "this help",
        [](Settings& s, const std::string&) {
          s.help = true;
          return std::string();
        }}},
  };
  return flags;
}

std::string EnvName(const std::string& flag) {
  std::string name = "MESH_RECONCILER_";
  for (char c : flag) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
  return name;
}

// "--bus", "-o", "-h": not a value ("-4" is one, refused by its flag as a number out of range).
bool LooksLikeFlag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' &&
         (arg[1] == '-' || std::isalpha(static_cast<unsigned char>(arg[1])));
}

// --help and --yes are typed each time, never inherited from the environment.
bool FromEnvironment(const std::string& name) {
  return name != "help" && name != "yes";
}

// Switches from the environment: "1", "true", "yes" set them; anything else leaves them off.
bool EnvTrue(const char* value) {
  std::string v = value;
  return v == "1" || v == "true" || v == "yes";
}

constexpr size_t kMaxSecretBytes = 4096;

// Without blocking: a FIFO in the file's place is refused, not waited on.
Result<std::string> ReadSecretFile(const std::string& path, const char* what) {
  Result<std::string> read = observers::ReadRegularFile(path, what, kMaxSecretBytes);
  if (!read.ok()) return read.status();
  std::string value = std::move(*read);
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  return value;
}

}  // namespace

std::vector<FlagDescription> DescribeFlags() {
  std::vector<FlagDescription> out;
  for (const auto& [name, spec] : Flags()) {
    out.push_back({name, spec.kind == FlagKind::kSwitch ? FlagArity::kSwitch : FlagArity::kValue,
                   spec.metavar, spec.values, spec.words, spec.help,
                   FromEnvironment(name) ? EnvName(name) : std::string()});
  }
  return out;
}

Result<Settings> ParseSettings(const std::vector<std::string>& args, const GetEnv& getenv) {
  std::vector<std::string> every;
  for (const auto& [name, spec] : Flags()) every.push_back(name);
  return ParseSettings(args, getenv, every);
}

Result<Settings> ParseSettings(const std::vector<std::string>& args, const GetEnv& getenv,
                               const std::vector<std::string>& accepted) {
  const auto accepts = [&accepted](const std::string& name) {
    return std::find(accepted.begin(), accepted.end(), name) != accepted.end();
  };
  Settings settings;
  std::vector<std::string> errors;
  // Environment first, so that the command line wins. Only the command's own flags: a variable
  // the sidecar sets for the daemon (MESH_RECONCILER_LISTEN) is nothing to `show-stream`.
  for (const auto& [name, spec] : Flags()) {
    if (!FromEnvironment(name) || !accepts(name)) continue;
    const char* value = getenv(EnvName(name).c_str());
    if (value == nullptr) continue;
    if (spec.kind == FlagKind::kSwitch) {
      if (EnvTrue(value)) spec.set(settings, "");
      continue;
    }
    std::string error = spec.set(settings, value);
    if (!error.empty()) errors.push_back(EnvName(name) + ": " + error);
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {  // the rest are operands, even those starting with '-'
      settings.positional.insert(settings.positional.end(), args.begin() + i + 1, args.end());
      break;
    }
    std::string name;
    std::optional<std::string> value;
    if (arg == "-h") {
      name = "help";
    } else if (arg.rfind("-o", 0) == 0) {  // -o json, -ojson, -o=json (kubectl's forms)
      name = "output";
      if (arg.size() > 2) value = arg.substr(arg[2] == '=' ? 3 : 2);
    } else if (arg.rfind("--", 0) == 0) {
      name = arg.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      errors.push_back("unknown flag " + arg);
      continue;
    } else {
      settings.positional.push_back(arg);
      continue;
    }
    std::string shown = "--" + name;  // as typed, for the messages
    if (arg == "-h") shown = "-h";
    if (arg.rfind("-o", 0) == 0) shown = "-o";
    auto it = Flags().find(name);
    if (it == Flags().end()) {
      errors.push_back("unknown flag --" + name);
      continue;
    }
    if (!accepts(name)) {
      errors.push_back(shown + " is not a flag of this command");
      continue;
    }
    if (it->second.kind == FlagKind::kSwitch) {
      if (value) {
        errors.push_back(shown + " takes no value");
        continue;
      }
      it->second.set(settings, "");
      continue;
    }
    if (!value) {
      // A value that looks like a flag is a flag: `--records --bus nats://...` lacks the file.
      if (i + 1 >= args.size() || LooksLikeFlag(args[i + 1])) {
        errors.push_back(shown + " needs a value" +
                         (i + 1 < args.size() ? " (\"" + args[i + 1] +
                                                    "\" is a flag; a value that starts with '-' "
                                                    "is given as " +
                                                    shown + "=VALUE)"
                                              : std::string()));
        continue;
      }
      value = args[++i];
    }
    std::string error = it->second.set(settings, *value);
    if (!error.empty()) errors.push_back(error);
  }
  if (errors.empty() && settings.http_connections_per_client > settings.http_connections) {
    errors.push_back(
        "--http-connections-per-client: " + std::to_string(settings.http_connections_per_client) +
        " is more than --http-connections (" + std::to_string(settings.http_connections) + ")");
  }
  if (!errors.empty()) {
    std::string message;
    for (const auto& e : errors) message += (message.empty() ? "" : "\n") + e;
    return Status(Errc::kInvalidArgument, message);
  }
  return settings;
}

Result<std::string> ReadPasswordFile(const std::string& path) {
  return ReadSecretFile(path, "--password-file");
}

Status LoadSecrets(Settings& settings, const GetEnv& getenv) {
  if (const char* password = getenv("MESH_RECONCILER_PASSWORD"); password && *password) {
    settings.bus.password = password;
  } else if (!settings.password_file.empty()) {
    auto value = ReadSecretFile(settings.password_file, "--password-file");
    if (!value.ok()) return value.status();
    settings.bus.password = *value;
  }
  if (const char* cert = getenv("MESH_BROKER_CERTIFICATE"); cert && *cert) {
    settings.bus.pinned_cert_file = cert;
  }
  return Status::Ok();
}

}  // namespace mesh::reconciler
