#include "reconciler/cli/settings.h"

#include <charconv>
#include <map>
#include <optional>
#include <sstream>

#include "observers/regular_file.h"
#include "observers/url.h"
#include "reconciler/base/duration.h"

namespace mesh::reconciler {
namespace {

enum class FlagKind { kString, kSwitch };

struct FlagSpec {
  FlagKind kind;
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
        [](Settings& s, const std::string& v) { return SetString(s.records_path, v); }}},
      {"bus",
       {FlagKind::kString,
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
        [](Settings& s, const std::string& v) { return SetString(s.bus.user, v); }}},
      {"password-file",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.password_file, v); }}},
      {"users-file",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.users_file, v); }}},
      {"users-scope",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (v == "server") {
            s.users_scope = model::UsersScope::kServer;
          } else if (v == "account") {
            s.users_scope = model::UsersScope::kAccount;
          } else {
            return "--users-scope: server or account";
          }
          return {};
        }}},
      {"pid-file",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.pid_file, v); }}},
      {"monitor",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (std::string problem = HttpAddressProblem("--monitor", v); !problem.empty()) {
            return problem;
          }
          return SetString(s.monitor_url, v);
        }}},
      {"store-dir",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.store_dir, v); }}},
      {"ca-file",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.bus.ca_file, v); }}},
      {"prune",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.prune = Prune::kYes;
          return std::string();
        }}},
      {"lease",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.lease = LeaseMode::kKv;
          return std::string();
        }}},
      {"bcrypt-cost",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          int cost = 0;
          const char* end = v.data() + v.size();
          const auto [stop, error] = std::from_chars(v.data(), end, cost);
          if (v.empty() || error != std::errc() || stop != end || cost < 4 || cost > 31) {
            return "--bcrypt-cost: expected a whole number from 4 to 31";
          }
          s.bcrypt_cost = cost;
          return {};
        }}},
      {"rehash",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.other_costs = model::OtherCostHashes::kRehash;
          return std::string();
        }}},
      {"json",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.format = OutputFormat::kJson;
          return std::string();
        }}},
      {"out",
       {FlagKind::kString, [](Settings& s, const std::string& v) { return SetString(s.out, v); }}},
      {"listen",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (v.rfind(':') == std::string::npos) return "--listen: expected HOST:PORT";
          s.listen = v;
          return {};
        }}},
      {"token-file",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.token_file, v); }}},
      {"interval",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--interval: " + d.status().message();
          if (d->count() < 100) return "--interval: at least 100ms";
          s.interval = *d;
          return {};
        }}},
      {"advisory-floor",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--advisory-floor: " + d.status().message();
          if (*d > std::chrono::minutes(1)) return "--advisory-floor: at most 1m";
          s.advisory_floor = *d;
          return {};
        }}},
      {"http-connections",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          size_t n = 0;
          const char* end = v.data() + v.size();
          const auto [stop, error] = std::from_chars(v.data(), end, n);
          if (v.empty() || error != std::errc() || stop != end || n < 128 || n > 16384) {
            return "--http-connections: expected a whole number from 128 to 16384";
          }
          s.http_connections = n;
          return {};
        }}},
      {"tls-cert",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.tls_cert_file, v); }}},
      {"tls-key",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.tls_key_file, v); }}},
      {"log-level",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (v != "debug" && v != "info" && v != "warn" && v != "error") {
            return "--log-level: expected debug, info, warn or error";
          }
          s.log_level = v;
          return {};
        }}},
      {"log-format",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (v != "logfmt" && v != "json") return "--log-format: logfmt or json";
          s.log_format = v;
          return {};
        }}},
      {"remote",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          if (std::string problem = HttpAddressProblem("--remote", v); !problem.empty()) {
            return problem;
          }
          return SetString(s.remote, v);
        }}},
      {"for",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) -> std::string {
          auto d = ParseDuration(v);
          if (!d.ok()) return "--for: " + d.status().message();
          s.hold_for = *d;
          return {};
        }}},
      {"reason",
       {FlagKind::kString,
        [](Settings& s, const std::string& v) { return SetString(s.reason, v); }}},
      {"once",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.once = true;
          return std::string();
        }}},
      {"yes",
       {FlagKind::kSwitch,
        [](Settings& s, const std::string&) {
          s.confirm = Confirm::kYes;
          return std::string();
        }}},
      {"help",
       {FlagKind::kSwitch,
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
    out.push_back({name, spec.kind == FlagKind::kSwitch ? FlagArity::kSwitch : FlagArity::kValue});
  }
  return out;
}

Result<Settings> ParseSettings(const std::vector<std::string>& args, const GetEnv& getenv) {
  Settings settings;
  std::vector<std::string> errors;
  // Environment first, so that the command line wins.
  for (const auto& [name, spec] : Flags()) {
    if (name == "help" || name == "yes") continue;  // typed each time, never inherited
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
    if (arg == "-h") {
      settings.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg == "--") {
      settings.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = Flags().find(name);
    if (it == Flags().end()) {
      errors.push_back("unknown flag --" + name);
      continue;
    }
    if (it->second.kind == FlagKind::kSwitch) {
      if (value) {
        errors.push_back("--" + name + " takes no value");
        continue;
      }
      it->second.set(settings, "");
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        errors.push_back("--" + name + " needs a value");
        continue;
      }
      value = args[++i];
    }
    std::string error = it->second.set(settings, *value);
    if (!error.empty()) errors.push_back(error);
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
