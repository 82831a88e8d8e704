#include "tests/support/nats_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <rapidjson/document.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "observers/http_client.h"
#include "observers/server_version.h"
#include "observers/unique_fd.h"

namespace mesh::testing {
namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(5);
constexpr auto kStartDeadline = std::chrono::seconds(30);
constexpr auto kStopDeadline = std::chrono::seconds(15);
constexpr size_t kLogTailBytes = 4000;
constexpr const char* kDefaultServerBinary = "/usr/sbin/nats-server";
constexpr const char* kServerBinaryVariable = "MESH_NATS_SERVER";

constexpr const char* kDefaultUsersConf = R"(accounts {
  MESH {
    jetstream: enabled
    users: [
      { user: "admin", password: "admin" }
    ]
  }
}
)";

using observers::UniqueFd;

sockaddr_in Loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

bool PortAccepts(int port) {
  UniqueFd fd(new int(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)));
  if (*fd < 0) return false;
  sockaddr_in addr = Loopback(port);
  return connect(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// The last bytes of a file, or a note that it could not be read (never throws).
std::string Tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "(no log at " + path + ")";
  std::ostringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  if (text.size() > kLogTailBytes) text = "..." + text.substr(text.size() - kLogTailBytes);
  return text;
}

// Reaps `pid` if it has exited. True when the process is gone.
bool Reaped(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  return r == pid || (r < 0 && errno == ECHILD);
}

std::string Quoted(const std::string& s) {
  return "\"" + s + "\"";
}

}  // namespace

namespace {

constexpr int kLowestPort = 10000;

// The first port the kernel hands out to outgoing connections (32768 unless configured).
int EphemeralLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  if (!(range >> low) || low <= kLowestPort + 1000) low = 32768;
  return low;
}

// Whether 127.0.0.1:port can be bound now.
bool Bindable(int port) {
  UniqueFd fd(new int(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)));
  if (*fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr = Loopback(port);
  return bind(*fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// A random bindable port BELOW the ephemeral range. A port from bind(0) lies inside it, and
// between our probe and the server's own bind any outgoing connection of a parallel test (the
// suite makes thousands) may be given it: "address already in use". Below the range, only
// another explicit bind can take it.
int BindablePortBelowEphemeral() {
  static std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(kLowestPort, EphemeralLow() - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int port = pick(random);
    if (Bindable(port)) return port;
  }
  throw std::runtime_error("no bindable port below the ephemeral range after 1000 tries");
}

}  // namespace

int FreePort() {
  // Never hand out the same port twice in one process: a server takes several at once.
  static std::mutex mutex;
  static std::set<int> handed_out;
  std::lock_guard<std::mutex> lock(mutex);
  while (true) {
    const int port = BindablePortBelowEphemeral();
    if (handed_out.insert(port).second) return port;
  }
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  std::string pattern = base + "/" + prefix + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  }
  return std::string(buf.data());
}

bool WaitFor(const std::function<bool()>& condition, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (true) {
    if (condition()) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(kPollInterval);
  }
}

namespace {

struct CurrentTestCase {
  std::mutex mutex;
  std::string name;                                  // guarded by mutex
  CurrentTestTag tag = CurrentTestTag::kNoTestCase;  // guarded by mutex
};

CurrentTestCase& Current() {
  static CurrentTestCase current;
  return current;
}

}  // namespace

void SetCurrentTestCase(const std::string& name, CurrentTestTag tag) {
  CurrentTestCase& current = Current();
  std::lock_guard<std::mutex> lock(current.mutex);
  current.name = name;
  current.tag = tag;
}

std::string ServerBinary() {
  {
    CurrentTestCase& current = Current();
    std::lock_guard<std::mutex> lock(current.mutex);
    if (current.tag == CurrentTestTag::kNotServer) {
      throw std::logic_error("test case \"" + current.name +
                             "\" runs nats-server but is not tagged [server]: tag it, so that "
                             "the server matrix (CMakeLists.txt, scripts/test.sh) runs it against "
                             "every server");
    }
  }
  const char* configured = std::getenv(kServerBinaryVariable);
  return configured != nullptr && *configured != '\0' ? configured : kDefaultServerBinary;
}

std::string ServerBinaryVersion() {
  const std::string binary = ServerBinary();
  const std::string command = "'" + binary + "' --version 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) throw std::runtime_error("cannot run " + binary + " --version");
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe.get()) != nullptr) output += buffer;
  // "nats-server: v2.9.10"
  const size_t v = output.find(": v");
  if (v == std::string::npos) throw std::runtime_error(binary + " --version said: " + output);
  size_t end = v + 3;
  while (end < output.size() &&
         (std::isdigit(static_cast<unsigned char>(output[end])) || output[end] == '.')) {
    ++end;
  }
  return output.substr(v + 3, end - v - 3);
}

bool ServerHasDefaultMaxConsumers() {
  static const bool has = [] {
    const auto version = observers::ParseServerVersion(ServerBinaryVersion());
    return version && *version >= observers::ServerVersion{2, 15, 0};
  }();
  return has;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream all;
  all << in.rdbuf();
  return all.str();
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::unique_ptr<NatsServer> NatsServer::Start(const NatsServerOptions& options) {
  std::unique_ptr<NatsServer> server(new NatsServer());
  server->options_ = options;
  server->dir_ = MakeTempDir("mesh-nats");
  server->port_ = FreePort();
  server->monitor_port_ = FreePort();
  if (server->options_.server_name.empty()) {
    server->options_.server_name = "n" + std::to_string(server->port_);
  }
  WriteFile(server->users_file(),
            options.users_conf.empty() ? std::string(kDefaultUsersConf) : options.users_conf);
  // As the reconciler keeps it (another mode is drift that a first pass would repair).
  std::filesystem::permissions(server->users_file(), std::filesystem::perms::owner_read |
                                                         std::filesystem::perms::owner_write);

  std::ostringstream conf;
  conf << "server_name: " << Quoted(server->options_.server_name) << "\n"
       << "listen: \"127.0.0.1:" << server->port_ << "\"\n"
       << "http: \"127.0.0.1:" << server->monitor_port_ << "\"\n"
       << "pid_file: " << Quoted(server->pid_file()) << "\n"
       << "log_file: " << Quoted(server->log_file()) << "\n"
       << "jetstream {\n  store_dir: " << Quoted(server->store_dir()) << "\n";
  if (options.default_max_consumers != 0 && ServerHasDefaultMaxConsumers()) {
    conf << "  limits { default_max_consumers: " << options.default_max_consumers << " }\n";
  }
  conf << "}\n";
  if (options.cluster_port != 0) {
    conf << "cluster {\n  name: " << Quoted(options.cluster_name) << "\n"
         << "  listen: \"127.0.0.1:" << options.cluster_port << "\"\n  routes: [\n";
    for (int route : options.route_ports) {
      conf << "    \"nats-route://127.0.0.1:" << route << "\"\n";
    }
    conf << "  ]\n}\n";
  }
  conf << options.extra_config << "\n";
  if (options.other_accounts.empty()) {
    conf << "include \"users.conf\"\n";
  } else {
    conf << "accounts {\n  include \"users.conf\"\n" << options.other_accounts << "\n}\n";
  }
  WriteFile(server->main_config(), conf.str());

  server->Launch();
  return server;
}

void NatsServer::Launch() {
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  const std::string binary = ServerBinary();
  const std::string config = main_config();
  const std::string log = log_file();
  std::vector<char*> argv = {const_cast<char*>(binary.c_str()), const_cast<char*>("-c"),
                             const_cast<char*>(config.c_str()), nullptr};
  const pid_t parent = getpid();
  pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    // The server dies with the test process even when that one aborts (a sanitizer halting, a
    // crash) and never runs its destructors: no server outlives the test that started it.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // Early errors (a bad configuration) go to stderr, before log_file takes over.
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
    }
    // Never inherit the test's sockets: a client socket held open by the server would hide
    // disconnects from the peer.
    close_range(3, ~0U, 0);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  pid_ = child;

  bool exited = false;
  const bool ready = WaitFor(
      [&] {
        if (Reaped(pid_)) {
          exited = true;
          return true;
        }
        if (!PortAccepts(port_)) return false;
        if (!options_.wait_healthy) return true;
        // A standalone server is up once it answers for JetStream: the full /healthz of 2.10
        // and later also fails for any stream it could not recover, which some tests make on
        // purpose. A cluster member waits for the full check (meta leader and assets current).
        const std::string query = options_.cluster_port == 0 ? "?js-enabled-only=true" : "";
        auto health =
            observers::HttpGet(monitor_url() + "/healthz" + query, std::chrono::seconds(2));
        return health.ok() && health->status == 200;
      },
      kStartDeadline);
  if (exited || !ready) {
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
    throw std::runtime_error(std::string("nats-server ") +
                             (exited ? "exited during start" : "did not become ready") + " (dir " +
                             dir_ + "); log tail:\n" + Tail(log));
  }
}

NatsServer::~NatsServer() {
  Stop();
  // Destroyed while a failing assertion unwinds: keep the folder for a post-mortem.
  if (std::uncaught_exceptions() == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

void NatsServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  if (!WaitFor([&] { return Reaped(pid_); }, kStopDeadline)) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  pid_ = -1;
}

void NatsServer::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

namespace {

// Whether every thread of `pid` is stopped ("T" in /proc/<pid>/task/<tid>/stat).
bool AllThreadsStopped(pid_t pid) {
  std::error_code ec;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  size_t threads = 0;
  for (const auto& task : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream stat(task.path() / "stat");
    std::string line;
    std::getline(stat, line);
    // "<tid> (<comm>) <state> ...": the state follows the last ')'.
    const size_t close = line.rfind(')');
    if (close == std::string::npos || close + 2 >= line.size()) return false;
    if (line[close + 2] != 'T' && line[close + 2] != 't') return false;
    ++threads;
  }
  return !ec && threads > 0;
}

}  // namespace

void NatsServer::Freeze() {
  if (pid_ <= 0) throw std::runtime_error("Freeze: the server is not running");
  if (kill(pid_, SIGSTOP) != 0) {
    throw std::runtime_error(std::string("SIGSTOP: ") + std::strerror(errno));
  }
  if (!WaitFor([&] { return AllThreadsStopped(pid_); }, std::chrono::seconds(10))) {
    throw std::runtime_error("the server's threads did not all stop after SIGSTOP");
  }
}

void NatsServer::Thaw() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

void NatsServer::Restart() {
  Stop();
  Launch();
}

void NatsServer::WipeStore() {
  if (running()) throw std::logic_error("WipeStore needs a stopped server");
  std::filesystem::remove_all(store_dir());
}

bool NatsServer::running() const {
  if (pid_ <= 0) return false;
  // WNOWAIT: look without reaping, so Stop() still owns the PID.
  siginfo_t info{};
  if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
    return false;
  }
  return info.si_pid == 0;
}

pid_t NatsServer::pid() const {
  return pid_;
}
int NatsServer::port() const {
  return port_;
}
int NatsServer::monitor_port() const {
  return monitor_port_;
}
std::string NatsServer::url() const {
  return "nats://127.0.0.1:" + std::to_string(port_);
}
std::string NatsServer::monitor_url() const {
  return "http://127.0.0.1:" + std::to_string(monitor_port_);
}
std::string NatsServer::dir() const {
  return dir_;
}
std::string NatsServer::users_file() const {
  return dir_ + "/users.conf";
}
std::string NatsServer::pid_file() const {
  return dir_ + "/nats.pid";
}
std::string NatsServer::store_dir() const {
  return dir_ + "/jetstream";
}
std::string NatsServer::log_file() const {
  return dir_ + "/nats.log";
}
std::string NatsServer::main_config() const {
  return dir_ + "/nats.conf";
}

std::optional<Jsz> JszOf(const NatsServer& server) {
  if (!server.running()) return std::nullopt;
  auto reply = observers::HttpGet(server.monitor_url() + "/jsz", std::chrono::seconds(2));
  if (!reply.ok() || reply->status != 200) return std::nullopt;
  rapidjson::Document doc;
  doc.Parse(reply->body.c_str());
  if (doc.HasParseError() || !doc.IsObject()) return std::nullopt;
  Jsz out;
  for (auto [name, field] : {std::pair{"streams", &out.streams}, {"consumers", &out.consumers}}) {
    auto it = doc.FindMember(name);
    if (it != doc.MemberEnd() && it->value.IsInt64()) *field = it->value.GetInt64();
  }
  auto api = doc.FindMember("api");
  if (api != doc.MemberEnd() && api->value.IsObject()) {
    auto total = api->value.FindMember("total");
    if (total != api->value.MemberEnd() && total->value.IsInt64()) {
      out.api_total = total->value.GetInt64();
    }
  }
  auto meta = doc.FindMember("meta_cluster");
  if (meta != doc.MemberEnd() && meta->value.IsObject()) {
    out.has_meta = true;
    auto leader = meta->value.FindMember("leader");
    if (leader != meta->value.MemberEnd() && leader->value.IsString()) {
      out.meta_leader = leader->value.GetString();
    }
    auto size = meta->value.FindMember("cluster_size");
    if (size != meta->value.MemberEnd() && size->value.IsInt())
      out.meta_size = size->value.GetInt();
    auto replicas = meta->value.FindMember("replicas");
    if (replicas != meta->value.MemberEnd() && replicas->value.IsArray()) {
      for (const auto& replica : replicas->value.GetArray()) {
        if (!replica.IsObject()) continue;
        auto name = replica.FindMember("name");
        if (name != replica.MemberEnd() && name->value.IsString()) {
          out.meta_replicas.emplace_back(name->value.GetString());
        }
      }
    }
  }
  return out;
}

int StreamsOnServer(const NatsServer& server) {
  const std::optional<Jsz> jsz = JszOf(server);
  return jsz ? static_cast<int>(jsz->streams) : -1;
}

}  // namespace mesh::testing
