// `run` (the daemon) and the on-call commands that talk to a running daemon: `reconcile
// --remote`, `hold`, `release`.
#include <malloc.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <signal.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "model/json_read.h"
#include "model/thread_safety.h"
#include "observers/http_client.h"
#include "reconciler/base/log.h"
#include "reconciler/cli/build_info.h"
#include "reconciler/cli/commands.h"
#include "reconciler/daemon/admin_token.h"
#include "reconciler/daemon/loop.h"
#include "reconciler/daemon/metrics.h"
#include "reconciler/daemon/watch.h"
#include "reconciler/http/http_handler.h"
#include "reconciler/http/http_server.h"
#include "reconciler/http/listener_tls.h"

namespace mesh::reconciler {
namespace {

// SIGTERM: the pass in flight may finish within this, and the lease is released after it;
// otherwise the pass is abandoned and the lease left to age out. Longer than a pass's longest
// wait (a request timeout, 5 s by default; the wait for a deleted stream's folder, 5 s) so that
// a slow pass still ends with a release; well inside the chart's terminationGracePeriodSeconds.
constexpr auto kShutdownGrace = std::chrono::seconds(15);
// How long shutdown waits for the hashes under way (a fraction of that at the default cost)
// before it exits without them: their results would be thrown away.
constexpr auto kHashingGrace = std::chrono::seconds(1);
// POST /reconcile waits this long for its pass; the CLI waits a little longer for the answer.
constexpr auto kForcedPassTimeout = std::chrono::seconds(60);
// The listener's connections that POST /reconcile waiters never take (--http-connections is
// at least 128): room for probes, metrics and the CLI's GETs.
constexpr size_t kProbeShare = 64;
constexpr auto kRemoteTimeout = kForcedPassTimeout + std::chrono::seconds(15);
constexpr auto kRemoteShortTimeout = std::chrono::seconds(10);

// The daemon's state as the HTTP handler sees it.
class DaemonHttpState : public HttpState {
 public:
  DaemonHttpState(Loop& loop, Metrics& metrics, AdminToken& token)
      : loop_(loop), metrics_(metrics), token_(token) {}
  std::string MetricsText() const override { return metrics_.Serialize(); }
  Health health() const override { return loop_.health(); }
  Readiness readiness() const override { return loop_.readiness(); }
  std::shared_ptr<const std::string> LastReportJson() const override {
    return loop_.last_report_json();
  }
  std::optional<std::string> TokenDigest() const override { return token_.digest(); }
  bool TokenFileConfigured() const override { return token_.enabled(); }
  Result<std::string> ForcePass() const override {
    Result<PassReport> report = loop_.RequestPass(kForcedPassTimeout);
    if (!report.ok()) return report.status();
    return ReportToJson(*report);
  }
  // Called on the reconcile thread once per waiter of a pass: the report is serialised once.
  uint64_t ForcePassAsync(ForcePassDone done) const override {
    return loop_.RequestPassAsync(
        [this, done = std::move(done)](Result<std::shared_ptr<const PassReport>> report) {
          if (!report.ok()) return done(report.status());
          done(JsonOf(*report));
        });
  }
  void CancelForcePass(uint64_t ticket) const override { loop_.CancelRequest(ticket); }
  Result<HoldState> Hold(std::chrono::milliseconds duration, const HoldRequest& request,
                         HoldScope scope) const override {
    return loop_.Hold(duration, request, scope);
  }
  HoldScope DefaultHoldScope() const override { return loop_.default_hold_scope(); }
  bool Release(const HoldRequest& request) const override { return loop_.Release(request); }
  HoldState hold_state() const override { return loop_.hold_state(); }

 private:
  std::shared_ptr<const std::string> JsonOf(const std::shared_ptr<const PassReport>& report) const {
    MutexLock lock(json_mutex_);
    if (json_report_ != report) {
      json_ = std::make_shared<const std::string>(ReportToJson(*report));
      json_report_ = report;
    }
    return json_;
  }

  Loop& loop_;
  Metrics& metrics_;
  AdminToken& token_;
  // The last forced pass's report as JSON, shared by all its waiters.
  mutable Mutex json_mutex_;
  mutable std::shared_ptr<const PassReport> json_report_ GUARDED_BY(json_mutex_);
  mutable std::shared_ptr<const std::string> json_ GUARDED_BY(json_mutex_);
};

// The signals the daemon takes, all on the main thread with sigwait (RunDaemon), none in a
// signal handler: whatever they start (logging, the lease's release, re-reading files) runs
// on a normal thread. No handler is installed at all.
//   TERM, INT, QUIT  shut down: the pass in flight may finish, the lease is released, exit 0
//   HUP              re-read the token and password files and wake a pass, which re-reads the
//                    records
//   USR1, USR2       no use: logged and ignored (their default action would end the daemon
//                    without a word and without releasing the lease)
// SIGPIPE is ignored: a write to a peer that has gone is an error of that write (EPIPE).
enum class SignalAction { kShutDown, kReload, kIgnore };

SignalAction ActionOf(int signal_number) {
  switch (signal_number) {
    case SIGHUP:
      return SignalAction::kReload;
    case SIGUSR1:
    case SIGUSR2:
      return SignalAction::kIgnore;
    default:
      return SignalAction::kShutDown;  // TERM, INT, QUIT
  }
}

const char* SignalName(int signal_number) {
  switch (signal_number) {
    case SIGTERM:
      return "TERM";
    case SIGINT:
      return "INT";
    case SIGQUIT:
      return "QUIT";
    case SIGHUP:
      return "HUP";
    case SIGUSR1:
      return "USR1";
    case SIGUSR2:
      return "USR2";
  }
  return "other";
}

// Blocks the daemon's signals in this thread and in every thread started after it (they inherit
// the mask), so that only sigwait receives them.
sigset_t BlockDaemonSignals() {
  signal(SIGPIPE, SIG_IGN);
  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// A token file readable by others is used, with a warning at each (re)load (as ssh warns).
void WarnAboutTokenFile(const AdminToken& token) {
  if (std::optional<std::string> warning = token.warning()) {
    Log(LogLevel::kWarn, 0, "admin token file readable by others", {{"detail", *warning}});
  }
}

// POST <remote><path> with the bearer token of --token-file. An https:// remote must present a
// certificate for its host from the CA of --ca-file (or, without it, from a system CA).
Result<observers::HttpResponse> PostToDaemon(const Settings& settings, const std::string& path,
                                             std::chrono::milliseconds timeout) {
  if (settings.remote.empty()) {
    return Status(Errc::kInvalidArgument,
                  "--remote URL is required (e.g. http://127.0.0.1:9464 or https://...)");
  }
  if (settings.token_file.empty()) {
    return Status(Errc::kInvalidArgument, "--token-file FILE is required");
  }
  Result<TokenFile> token = ReadTokenFile(settings.token_file);
  if (!token.ok()) return token.status();
  if (token->warning)
    std::fprintf(stderr, "mesh-reconciler: warning: %s\n", token->warning->c_str());
  std::string base = settings.remote;
  while (!base.empty() && base.back() == '/') base.pop_back();
  observers::HttpCall call;
  call.method = "POST";
  call.url = base + path;
  call.headers = {{"Authorization", "Bearer " + token->token}};
  call.ca_file = settings.bus.ca_file;  // --ca-file: used for https:// remotes only
  return observers::HttpSend(call, timeout);
}

// The daemon's {"error": "..."} message, or the status line.
std::string RemoteError(const observers::HttpResponse& response) {
  std::optional<rapidjson::Document> doc = model::json::ParseObject(response.body);
  const rapidjson::Value* error = doc ? model::json::Member(*doc, "error") : nullptr;
  std::string detail;
  if (error != nullptr && error->IsString()) {
    detail = error->GetString();
  } else {
    detail = response.body;
    while (!detail.empty() && detail.back() == '\n') detail.pop_back();
  }
  return "the daemon answered HTTP " + std::to_string(response.status) +
         (detail.empty() ? "" : ": " + detail);
}

bool IsUsageError(const Status& status) {
  return status.code() == Errc::kInvalidArgument;
}

// The daemon's help; its flags are listed from main.cc's command table.
constexpr char kRunHelpText[] =
    R"(Usage: mesh-reconciler run --records FILE --bus URL [flags]

The daemon: one reconcile thread runs a pass at start, then every --interval (jittered by
10%), and at once when a stream or consumer changes on the bus (JetStream advisories), on a
reconnect, or when the records file, the users file or the token file changes on disk. Wake-ups
during a pass are coalesced into one following pass. A failed pass is retried with backoff
(1 s doubling up to 60 s, never more than the interval). The bus being unreachable is not fatal:
the endpoints are served and the reconciler keeps trying. Invalid records: the last valid ones
stay in force, mesh_reconciler_records_valid is 0 and /readyz says why.

HTTP endpoints (--listen; HTTPS with --tls-cert and --tls-key):
  GET  /metrics          Prometheus metrics
  GET  /healthz          200 while the reconcile loop is alive
  GET  /readyz           200 when the records are valid, the bus is reachable, the last pass
                         finished and the users file was written; 503 and the reason otherwise
  GET  /drift            the last pass's report (JSON), the last failed pass that acted
                         ("last_failed") and the last that failed before acting
                         ("last_failed_without_actions")
  POST /reconcile        run a pass now and answer with its report (waits up to 60 s);
                         requests that arrive while a pass runs share the next pass, and
                         forced passes start at least 1 s apart, so a burst of any size runs
                         at most two passes
  POST /hold?for=30m     observe only, repair nothing, for a while (at most 24h)
  POST /release          end a hold
Every POST needs "Authorization: Bearer <token>" with the token of --token-file. Without
--token-file every POST is refused (403) and only the read-only endpoints are served; listening
on an address other than loopback without --token-file is refused at start. A token file that
becomes unreadable or empty turns the POSTs off (403) until it is fixed.

HTTPS: --tls-cert and --tls-key (both or neither) serve every endpoint over TLS 1.2 or later
only. The files are re-read when they change (checked at each new connection): a rotated
certificate is presented from the next connection on; a replacement that cannot be used (bad
PEM, a key that does not match) is logged and the previous certificate stays in force. Files
that cannot be used at start are an error (exit 1).

Signals: SIGTERM, SIGINT or SIGQUIT: the pass in flight may finish (for up to 15 s, else it is
abandoned), then the lease is released (with --lease: a standby takes over at its next round),
the connection is closed and the daemon exits 0. SIGHUP: the token and password files are read
again and a pass runs, reading the records again. SIGUSR1 and SIGUSR2 are logged and ignored.

A rotated password (--password-file replaced, e.g. a Secret update; or SIGHUP) is used without a
restart: the next pass renders it into the users file (every other hash is kept), the server
reloads, and the daemon then logs in with it.

Exit codes: 0 stopped by a signal, 1 could not start, 64 usage error (a missing --records or
--bus, a stray argument: at start, before any retry).
)";

}  // namespace

const char* const kRunHelp = kRunHelpText;

const char* const kHoldHelp =
    R"(Usage: mesh-reconciler hold --remote URL --token-file FILE [--ca-file FILE] [--for 30m]
                            [--reason TEXT] [--scope bus|pod]

Asks a running daemon to observe only (report drift, repair nothing) for a while; the hold ends
on its own after --for (default 30m, at most 24h), or with `mesh-reconciler release`. The
daemon logs who held it (this client's address) and why, and /drift shows both until it ends.
With --lease the hold is for the whole bus by default (--scope bus): the daemon writes a hold
record into the lease's KV bucket, and every replica, one started later too, observes only
while it stands; this command returns once the record is written. --scope pod holds this daemon
alone (the only scope without --lease).
With an https:// --remote, --ca-file is the only CA trusted for the daemon's certificate, which
must name the URL's host (without it, the system's CAs). --json (or -o json): the daemon's
answer (docs/schemas/hold.v1.schema.json).

Exit codes: 0 held, 1 error (unreachable daemon, refused token), 64 usage error.
)";

const char* const kReleaseHelp =
    R"(Usage: mesh-reconciler release --remote URL --token-file FILE [--ca-file FILE]
                               [--reason TEXT]

Ends a hold on a running daemon; a pass runs at once and repairs what drifted meanwhile. The
daemon logs who released it and why, beside the hold's own reason. A hold for the whole bus
ends through any replica: its record is deleted, and every replica acts again at its next lease
round; this command returns once the record is gone.
With an https:// --remote, --ca-file is the only CA trusted for the daemon's certificate.
--json (or -o json): the daemon's answer (docs/schemas/release.v1.schema.json).

Exit codes: 0 released (or was not held), 1 error, 64 usage error.
)";

namespace {

// glibc raises its mmap threshold to the largest block freed (up to 32 MiB), and its trim
// threshold to twice that. After the first large pass, every pass's big transient buffers (the
// replies for 256 consumers, the observed and planned vectors of thousands of objects) are then
// carved from the arenas and freed back into them, and each thread's arena (the reconcile
// thread, the observation's helper, cnats', the HTTP threads') keeps its own high-water mark:
// the daemon's resident memory grew with every pass under load. Fixed thresholds keep blocks of
// 128 KiB and more in mappings of their own, returned when freed, and return free memory above
// 128 KiB at the top of a heap (docs/benchmarks.md, "Memory"). An operator's own malloc tuning
// (GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) is left in force.
void BoundRetainedHeap() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables != nullptr && std::strstr(tunables, "glibc.malloc.") != nullptr) ||
      std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr) {
    return;
  }
  constexpr int kThreshold = 128 * 1024;
  if (mallopt(M_MMAP_THRESHOLD, kThreshold) != 1 || mallopt(M_TRIM_THRESHOLD, kThreshold) != 1) {
    Log(LogLevel::kWarn, 0, "malloc thresholds not set; memory may stay at its peak");
  }
}

// Re-reads --password-file (when it changes, and on SIGHUP) and hands the password to the
// runner, which renders a new one into the users file and logs in with it once the server has
// loaded that file. Nothing when MESH_RECONCILER_PASSWORD gives the password (it cannot change).
void ReloadPassword(const Settings& settings, ReconcilerRunner& runner) {
  if (settings.password_file.empty()) return;
  if (const char* env = std::getenv("MESH_RECONCILER_PASSWORD"); env != nullptr && *env != '\0') {
    return;
  }
  Result<std::string> password = ReadPasswordFile(settings.password_file);
  if (!password.ok() || password->empty()) {
    Log(LogLevel::kWarn, 0, "password file unusable: the password in use is kept",
        {{"error", password.ok() ? "empty" : password.status().message()}});
    return;
  }
  runner.RotatePassword(std::move(*password));
}

// Re-reads the admin token file (when it changes, and on SIGHUP).
void ReloadToken(AdminToken& token) {
  if (!token.enabled()) return;
  if (Status reloaded = token.Reload(); reloaded.ok()) {
    Log(LogLevel::kInfo, 0, "admin token reloaded");
    WarnAboutTokenFile(token);
  } else {
    Log(LogLevel::kWarn, 0, "admin token unusable: POSTs refused until it is fixed",
        {{"error", reloaded.message()}});
  }
}

}  // namespace

int RunDaemon(Settings& settings) {
  constexpr const char* kCommand = "run";
  BoundRetainedHeap();
  if (Status secrets = LoadSecrets(settings, ProcessEnv); !secrets.ok()) {
    return CommandFail(kCommand, secrets.message());
  }
  // Usage errors first, at start: without --bus the daemon would retry "no bus address
  // configured" for ever.
  if (settings.records_path.empty()) return CommandUsage(kCommand, "--records FILE is required");
  if (settings.bus.urls.empty()) {
    return CommandUsage(kCommand, "--bus URL is required (or MESH_RECONCILER_BUS)");
  }
  if (auto exit = CheckStoreDir(settings, kCommand)) return *exit;
  if (settings.tls_cert_file.empty() != settings.tls_key_file.empty()) {
    return CommandUsage(kCommand, "--tls-cert and --tls-key go together: give both or neither");
  }
  Result<ListenAddress> listen = ParseListenAddress(settings.listen);
  if (!listen.ok()) return CommandUsage(kCommand, listen.status().message());
  AdminToken token(settings.token_file);
  if (token.enabled()) {
    if (Status loaded = token.Reload(); !loaded.ok())
      return CommandFail(kCommand, loaded.message());
    WarnAboutTokenFile(token);
  }
  if (!listen->loopback && !token.enabled()) {
    return CommandFail(kCommand, "refusing to listen on " + settings.listen +
                                     " (not loopback) without --token-file");
  }

  HttpServerOptions http_options;
  http_options.max_connections = settings.http_connections;
  http_options.max_connections_per_client = settings.http_connections_per_client;
  http_options.forced_pass_timeout = kForcedPassTimeout;
  if (!settings.tls_cert_file.empty()) {
    Result<std::shared_ptr<ListenerTls>> tls =
        ListenerTls::Load(settings.tls_cert_file, settings.tls_key_file);
    if (!tls.ok()) return CommandFail(kCommand, tls.status().message());
    http_options.tls = std::move(*tls);
  }

  const sigset_t daemon_signals = BlockDaemonSignals();
  Metrics metrics(MESH_RECONCILER_VERSION, BuildCommit(), settings.lease);
  LoopOptions options;
  options.interval = settings.interval;
  options.advisory_floor = settings.advisory_floor;
  // Waiting POST /reconcile connections are busy (never evicted): a share of the listener
  // stays for everything else, the probes first, however many one address may hold.
  options.max_waiting_requests = http_options.max_connections - kProbeShare;
  if (settings.lease == LeaseMode::kKv) {
    options.lease_round = LeaseRoundFor(settings.interval);
    options.lease_grace = LeaseGraceFor(settings.interval);
  }
  Loop loop(options, &metrics);
  DaemonHttpState state(loop, metrics, token);
  Result<std::unique_ptr<HttpServer>> server = HttpServer::Start(*listen, state, http_options);
  if (!server.ok()) return CommandFail(kCommand, server.status().message());
  Log(LogLevel::kInfo, 0, http_options.tls ? "serving HTTPS" : "serving HTTP",
      {{"address", listen->host},
       {"port", (*server)->port()},
       {"admin", token.enabled() ? "token" : "disabled"},
       {"interval_ms", settings.interval.count()},
       {"version", MESH_RECONCILER_VERSION}});

  // New and changed passwords are hashed on their own threads: the passes repair JetStream
  // meanwhile, and the users file follows when the hashes are ready.
  BackgroundHashing hashing{
      [&loop] { loop.Wake(Trigger::kUsersFileChanged); },
      [&metrics](int64_t pending) { metrics.SetCredentialsPending(pending); }};
  ReconcilerRunner runner(settings, loop.MakeEventSink(), std::move(hashing));
  std::vector<FileWatch> watches = {
      {settings.records_path, [&loop] { loop.Wake(Trigger::kRecordsChanged); }},
      {settings.users_file, [&loop] { loop.Wake(Trigger::kUsersFileChanged); }},
      {settings.token_file, [&token] { ReloadToken(token); }},
      {settings.password_file, [&settings, &runner, &loop] {
         ReloadPassword(settings, runner);
         loop.Wake(Trigger::kUsersFileChanged);
       }}};
  Result<std::unique_ptr<FileWatcher>> watcher = FileWatcher::Start(std::move(watches));
  if (!watcher.ok()) {
    Log(LogLevel::kWarn, 0, "file changes will wait for the next periodic pass",
        {{"error", watcher.status().message()}});
  }
  loop.Start(runner);

  int signal_number = 0;
  for (bool running = true; running;) {
    if (sigwait(&daemon_signals, &signal_number) != 0) continue;
    switch (ActionOf(signal_number)) {
      case SignalAction::kReload:
        Log(LogLevel::kInfo, 0, "re-reading files", {{"signal", SignalName(signal_number)}});
        ReloadToken(token);
        ReloadPassword(settings, runner);
        loop.Wake(Trigger::kRecordsChanged);
        break;
      case SignalAction::kIgnore:
        Log(LogLevel::kInfo, 0, "signal ignored", {{"signal", SignalName(signal_number)}});
        break;
      case SignalAction::kShutDown:
        running = false;
        break;
    }
  }
  Log(LogLevel::kInfo, 0, "shutting down", {{"signal", SignalName(signal_number)}});
  if (watcher.ok()) watcher->reset();
  if (!loop.Stop(kShutdownGrace)) {
    // The pass in flight is abandoned: the reconcile thread still uses the runner, so it is
    // not destroyed; the process exits and the kernel closes the connection.
    Log(LogLevel::kWarn, loop.passes_started(), "abandoning the pass in flight");
    (*server)->Stop();
    std::fflush(nullptr);
    _exit(kExitOk);
  }
  if (runner.StopHashing(kHashingGrace) == HashingStop::kStillRunning) {
    // bcrypt cannot be interrupted: at a high cost on a saturated CPU (the hashing runs at
    // nice 19) a hash under way took over a minute, past the kubelet's grace period. The
    // hashing threads still use the runner, so it is not destroyed; the kernel closes the
    // bus connection. The lease was released when the loop stopped.
    Log(LogLevel::kInfo, 0, "not waiting for the hashes under way: their results are dropped",
        {{"waited_ms", std::chrono::milliseconds(kHashingGrace).count()}});
    (*server)->Stop();
    Log(LogLevel::kInfo, 0, "stopped");
    std::fflush(nullptr);
    _exit(kExitOk);
  }
  (*server)->Stop();
  Log(LogLevel::kInfo, 0, "stopped");
  return kExitOk;  // the runner (and its bus connection) is closed on the way out
}

int RunRemoteReconcile(Settings& settings) {
  constexpr const char* kCommand = "reconcile";
  Result<observers::HttpResponse> response = PostToDaemon(settings, "/reconcile", kRemoteTimeout);
  if (!response.ok()) {
    return IsUsageError(response.status()) ? CommandUsage(kCommand, response.status().message())
                                           : CommandFail(kCommand, response.status().message());
  }
  if (response->status != 200) return CommandFail(kCommand, RemoteError(*response));
  Result<PassReport> report = ReportFromJson(response->body);
  if (!report.ok()) {
    return CommandFail(kCommand, "unreadable report from the daemon: " + report.status().message());
  }
  if (settings.format == OutputFormat::kJson) {
    std::fputs(response->body.c_str(), stdout);
  } else {
    std::fputs(FormatReportTable(*report).c_str(), stdout);
  }
  if (!report->status.ok() || report->any_action_failed()) return kExitError;
  return report->converged() ? kExitOk : kExitDrift;
}

// POSTs `target` to the daemon and parses its 200 answer as a JSON object into `doc`.
// Returns kExitOk, or the exit code after printing why (usage, transport, refusal, garbage).
int PostForJson(const Settings& settings, const char* command, const std::string& target,
                rapidjson::Document& doc, std::string* body) {
  Result<observers::HttpResponse> response = PostToDaemon(settings, target, kRemoteShortTimeout);
  if (!response.ok()) {
    return IsUsageError(response.status()) ? CommandUsage(command, response.status().message())
                                           : CommandFail(command, response.status().message());
  }
  if (response->status != 200) return CommandFail(command, RemoteError(*response));
  std::optional<rapidjson::Document> parsed = model::json::ParseObject(response->body);
  if (!parsed) return CommandFail(command, "unreadable answer from the daemon");
  doc = std::move(*parsed);
  *body = std::move(response->body);
  return kExitOk;
}

namespace {

// RFC 3986 unreserved characters stay, every other byte becomes %XX.
std::string PercentEncode(const std::string& text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0x0f];
    }
  }
  return out;
}

// What the daemon would refuse, refused here as a usage error (the daemon says the same).
}  // namespace

namespace {

// How long hold and release wait for the reconcile thread to write or delete the bus hold's
// record (it runs between passes: a long first pass delays it).
constexpr auto kBusHoldWait = std::chrono::seconds(30);
constexpr auto kBusHoldPoll = std::chrono::milliseconds(100);

// GET <remote>/drift (no token): the daemon's "hold" object as it stands now.
Result<rapidjson::Document> HoldNow(const Settings& settings) {
  std::string base = settings.remote;
  while (!base.empty() && base.back() == '/') base.pop_back();
  observers::HttpCall call;
  call.url = base + "/drift";
  call.ca_file = settings.bus.ca_file;
  Result<observers::HttpResponse> response = observers::HttpSend(call, kRemoteShortTimeout);
  if (!response.ok()) return response.status();
  if (response->status != 200) return Status(Errc::kUnavailable, RemoteError(*response));
  std::optional<rapidjson::Document> doc = model::json::ParseObject(response->body);
  const rapidjson::Value* hold = doc ? model::json::Member(*doc, "hold") : nullptr;
  if (hold == nullptr || !hold->IsObject()) {
    return Status(Errc::kInvalidArgument, "unreadable /drift from the daemon");
  }
  rapidjson::Document out;
  out.CopyFrom(*hold, out.GetAllocator());
  return out;
}

// Polls the daemon's hold until `done(hold)` says so (kOk), the daemon reports an error for
// the bus hold (its message), or kBusHoldWait passes.
Status WaitForHold(const Settings& settings,
                   const std::function<bool(const rapidjson::Value&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + kBusHoldWait;
  std::string last = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    Result<rapidjson::Document> hold = HoldNow(settings);
    if (hold.ok()) {
      if (done(*hold)) return Status::Ok();
      const std::string error = model::json::String(*hold, "error");
      if (!error.empty()) return Status(Errc::kUnavailable, error);
      last = "still pending";
    } else {
      last = hold.status().message();
    }
    std::this_thread::sleep_for(kBusHoldPoll);  // a poll of the daemon's state, on-call waits
  }
  return Status(Errc::kTimeout, "the daemon did not confirm within " +
                                    std::to_string(kBusHoldWait.count()) + " s (" + last + ")");
}

}  // namespace

int RunHold(Settings& settings) {
  constexpr const char* kCommand = "hold";
  if (settings.hold_for.count() <= 0 || settings.hold_for > kMaxHold) {
    return CommandUsage(kCommand, "--for: more than 0 and at most 24h");
  }
  if (std::string problem = HoldReasonProblem(settings.reason); !problem.empty()) {
    return CommandUsage(kCommand, "--reason: " + problem);
  }
  std::string target = "/hold?for=" + std::to_string(settings.hold_for.count()) + "ms";
  if (!settings.reason.empty()) target += "&reason=" + PercentEncode(settings.reason);
  if (!settings.hold_scope.empty()) target += "&scope=" + settings.hold_scope;
  rapidjson::Document doc;
  std::string body;
  if (int code = PostForJson(settings, kCommand, target, doc, &body); code != kExitOk) return code;
  const rapidjson::Value* until = model::json::Member(doc, "until");
  if (until == nullptr || !until->IsString()) {
    return CommandFail(kCommand, "unreadable answer from the daemon");
  }
  const bool bus = model::json::String(doc, "scope") == "bus";
  if (bus) {
    // The daemon holds itself at once; every other instance once the record is written.
    Status written = WaitForHold(settings, [](const rapidjson::Value& hold) {
      return model::json::String(hold, "scope") == "bus" &&
             model::json::Bool(hold, "published", false);
    });
    if (!written.ok()) {
      return CommandFail(kCommand, "the hold for the bus is not written (" + written.message() +
                                       "): this instance alone is held until " +
                                       until->GetString());
    }
    Result<rapidjson::Document> now = HoldNow(settings);
    if (now.ok()) {
      now->AddMember("schema", rapidjson::StringRef(kHoldSchema), now->GetAllocator());
      rapidjson::StringBuffer buffer;
      rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
      now->Accept(writer);
      body = std::string(buffer.GetString(), buffer.GetSize()) + "\n";
    }
  }
  if (settings.format == OutputFormat::kJson) {
    std::fputs(body.c_str(), stdout);  // docs/schemas/hold.v1.schema.json
    return kExitOk;
  }
  std::printf(bus ? "held the bus until %s: every reconciler observes only (`mesh-reconciler "
                    "release` ends it)\n"
                  : "held until %s: passes observe only (`mesh-reconciler release` ends it)\n",
              until->GetString());
  return kExitOk;
}

int RunRelease(Settings& settings) {
  constexpr const char* kCommand = "release";
  if (std::string problem = HoldReasonProblem(settings.reason); !problem.empty()) {
    return CommandUsage(kCommand, "--reason: " + problem);
  }
  std::string target = "/release";
  if (!settings.reason.empty()) target += "?reason=" + PercentEncode(settings.reason);
  rapidjson::Document doc;
  std::string body;
  if (int code = PostForJson(settings, kCommand, target, doc, &body); code != kExitOk) return code;
  const rapidjson::Value* was_held = model::json::Member(doc, "was_held");
  if (was_held == nullptr || !was_held->IsBool()) {
    return CommandFail(kCommand, "unreadable answer from the daemon");
  }
  // A bus hold ends when the daemon has deleted its record (between its passes).
  Status ended = WaitForHold(settings, [](const rapidjson::Value& hold) {
    return !model::json::Bool(hold, "held", true);
  });
  if (!ended.ok()) return CommandFail(kCommand, "still held: " + ended.message());
  if (settings.format == OutputFormat::kJson) {
    std::fputs(body.c_str(), stdout);  // docs/schemas/release.v1.schema.json
    return kExitOk;
  }
  std::puts(was_held->GetBool() ? "released: passes repair again (a pass runs now)"
                                : "was not held");
  return kExitOk;
}

}  // namespace mesh::reconciler
