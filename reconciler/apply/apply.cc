// Apply: executes a plan's actions; the only part of a pass that writes.
//
// The users file. A kWriteUsersFile action yields TWO outcomes: the write itself (done or
// failed), then a kReloadServer outcome for the reload that must follow it (a kReloadServer
// action yields only the latter). The reload outcome is
//   - done     when the server confirmed it (/varz config_load_time moved past its old value);
//   - skipped  when no --pid-file is configured: the reload was not requested, and the server
//              keeps the users it has until someone reloads it (the next pass reports it);
//   - failed   when the signal could not be sent, when no --monitor is configured to confirm it
//              (a reload is never assumed), when the monitor is unreachable, or when the server
//              did not load the file before the deadline (it rejected the file: the old
//              configuration stays in force, and the file on disk is always a complete
//              rendering, never half-written).
// A failed write leaves the old file intact and skips the reload.
//
// Streams and consumers: every stream action is sent first (RequestMany keeps them in flight),
// then every consumer action, except those whose stream failed to be created (skipped).
#include "reconciler/apply/apply.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "model/json_read.h"
#include "observers/jetstream.h"
#include "observers/jetstream_api.h"
#include "observers/monitor.h"
#include "observers/regular_file.h"
#include "observers/server_version.h"
#include "observers/unique_fd.h"
#include "reconciler/apply/encode.h"

namespace mesh::reconciler {
namespace {

constexpr auto kConfirmPollInterval = std::chrono::milliseconds(20);
constexpr auto kMonitorRequestTimeout = std::chrono::milliseconds(2000);

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

using observers::UniqueFd;

Status WriteAll(int fd, const std::string& bytes) {
  size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(Errc::kIo, Errno("write"));
    written += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Status FsyncFolder(const std::string& folder) {
  UniqueFd fd(new int(open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
  if (*fd < 0) return Status(Errc::kIo, Errno("open folder " + folder));
  if (fsync(*fd) != 0) return Status(Errc::kIo, Errno("fsync folder " + folder));
  return Status::Ok();
}

// How consumers are created and updated on this server (observers/server_version.h).
enum class ConsumerApi {
  kLegacy,   // 2.9: $JS.API.CONSUMER.DURABLE.CREATE, which creates or silently updates
  kActions,  // 2.10+: $JS.API.CONSUMER.CREATE.<stream>.<durable> with "action"
};

ConsumerApi ConsumerApiOf(observers::BusConnection* bus) {
  if (bus == nullptr || !bus->connected()) return ConsumerApi::kLegacy;
  const std::optional<observers::ServerVersion> version = bus->server_version();
  return version && observers::SupportsConsumerActions(*version) ? ConsumerApi::kActions
                                                                 : ConsumerApi::kLegacy;
}

std::string ConsumerSubject(ConsumerApi api, const model::ConsumerSpec& spec) {
  return api == ConsumerApi::kActions
             ? observers::jsapi::ConsumerCreate(spec.stream.str(), spec.durable.str())
             : observers::jsapi::ConsumerDurableCreate(spec.stream.str(), spec.durable.str());
}

// The subject and body of one JetStream API action.
observers::ApiRequest RequestFor(const Action& action, ConsumerApi api) {
  observers::ApiRequest request;
  switch (action.kind) {
    case ActionKind::kCreateStream:
      request.subject = observers::jsapi::StreamCreate(action.stream->name.str());
      request.payload = EncodeStreamConfig(*action.stream);
      break;
    case ActionKind::kUpdateStream:
      request.subject = observers::jsapi::StreamUpdate(action.stream->name.str());
      request.payload = EncodeStreamUpdate(*action.stream, action.observed_config);
      break;
    case ActionKind::kDeleteStream:
      request.subject = observers::jsapi::StreamDelete(action.target_stream.str());
      break;
    case ActionKind::kCreateConsumer:
      // With actions, a create never overwrites what another writer made meanwhile (10148);
      // 2.9 applies a durable create with a changed configuration as an update.
      request.subject = ConsumerSubject(api, *action.consumer);
      request.payload = EncodeConsumerCreate(*action.consumer, api == ConsumerApi::kActions
                                                                   ? ConsumerRequest::kCreate
                                                                   : ConsumerRequest::kLegacy);
      break;
    case ActionKind::kUpdateConsumer:
      // With actions, an update never recreates a consumer deleted meanwhile (10149).
      request.subject = ConsumerSubject(api, *action.consumer);
      request.payload = EncodeConsumerUpdate(
          *action.consumer, action.observed_config,
          api == ConsumerApi::kActions ? ConsumerRequest::kUpdate : ConsumerRequest::kLegacy);
      break;
    case ActionKind::kDeleteConsumer:
      request.subject = observers::jsapi::ConsumerDelete(action.target_stream.str(),
                                                         action.target_consumer.str());
      break;
    case ActionKind::kWriteUsersFile:
    case ActionKind::kReloadServer:
      break;
  }
  return request;
}

// Requests built and replies held at once by SendAll. Replies to creations carry the whole
// stream or consumer info (about a kilobyte each), so a first convergence of thousands of
// objects would otherwise hold every request and every reply until the last one arrived.
// Each chunk still keeps the bus's max_in_flight requests outstanding; between chunks the
// pipeline drains once, which costs one round trip per chunk.
constexpr size_t kSendChunk = 256;

// Sends the actions at `which` (indices into `actions`, each moved into its outcome) through the
// bus, or fails them all when there is none, kSendChunk at a time, each chunk only when
// `before_chunk` (if any) still lets this instance act. The outcomes are appended to `out`, in
// the order of `which`.
void SendAll(std::vector<Action>& actions, const std::vector<size_t>& which,
             observers::BusConnection* bus, ConsumerApi api, const BeforeChunk& before_chunk,
             std::vector<ActionOutcome>& out) {
  std::vector<observers::ApiRequest> requests;
  // More than one chunk (a first convergence, a wipe's recovery): over the bus's lanes, which
  // open during the first chunk and carry the later ones (observers::Spread::kLanes).
  const observers::Spread spread =
      which.size() > kSendChunk ? observers::Spread::kLanes : observers::Spread::kOneConnection;
  auto fail_rest = [&](size_t from, Outcome outcome, const std::string& detail) {
    for (size_t i = from; i < which.size(); ++i) {
      out.push_back({std::move(actions[which[i]]), outcome, 0, detail});
    }
  };
  for (size_t begin = 0; begin < which.size(); begin += kSendChunk) {
    const size_t end = std::min(which.size(), begin + kSendChunk);
    // A connection lost (e.g. by an earlier chunk) fails the rest at once rather than one
    // request timeout at a time; the next pass reconnects.
    if (bus == nullptr || !bus->connected()) {
      return fail_rest(begin, Outcome::kFailed, "not sent: not connected to the bus");
    }
    if (before_chunk) {
      if (ChunkDecision decision = before_chunk(); decision.verdict == ChunkVerdict::kStop) {
        return fail_rest(begin, Outcome::kSkipped, "not sent: " + decision.reason);
      }
    }
    requests.clear();
    for (size_t i = begin; i < end; ++i) requests.push_back(RequestFor(actions[which[i]], api));
    const std::vector<observers::ApiReply> replies = bus->RequestMany(requests, spread);
    for (size_t i = begin; i < end; ++i) {
      Action& action = actions[which[i]];
      out.push_back(i - begin < replies.size() ? OutcomeOf(std::move(action), replies[i - begin])
                                               : ActionOutcome{std::move(action), Outcome::kFailed,
                                                               0, "no reply recorded"});
    }
  }
}

// Signals the server and waits for it to confirm; the outcome of a kReloadServer action.
ActionOutcome Reload(const std::string& name, const ApplyTargets& targets) {
  Action action;
  action.kind = ActionKind::kReloadServer;
  action.name = name;
  ActionOutcome out{action, Outcome::kDone, 0, ""};
  if (targets.pid_file.empty()) {
    out.outcome = Outcome::kSkipped;
    out.detail = "reload not requested: no --pid-file configured";
    return out;
  }
  // The load time before the signal: the reload is confirmed when it moves past it.
  std::optional<int64_t> before;
  if (!targets.monitor_url.empty()) {
    observers::ObservedServer server =
        observers::ObserveServer(targets.monitor_url, kMonitorRequestTimeout);
    if (server.reachable) before = server.config_load_time_unix_ns;
  }
  const ReloadSignal sent = SignalReload(targets.pid_file);
  if (!sent.status.ok()) {
    out.outcome = Outcome::kFailed;
    out.signal_refusal = sent.refusal;
    out.detail = "reload not requested: " + sent.status.message();
    return out;
  }
  // Every later word names the PID signalled.
  const std::string signalled = " (SIGHUP to nats-server pid " + std::to_string(sent.pid) + ")";
  if (!before) {
    out.outcome = Outcome::kFailed;
    out.detail =
        (targets.monitor_url.empty() ? "reload requested, not confirmed: no --monitor configured"
                                     : "reload requested, not confirmed: monitor unreachable") +
        signalled;
    return out;
  }
  if (Status confirmed = ConfirmReload(targets.monitor_url, *before, targets.reload_timeout);
      !confirmed.ok()) {
    out.outcome = Outcome::kFailed;
    out.detail = confirmed.message() + signalled;
    return out;
  }
  out.detail = "reload confirmed" + signalled;
  return out;
}

// Moves `action` into its outcome (a write carries the whole rendered file).
void ApplyUsersFile(Action action, const ApplyTargets& targets, std::vector<ActionOutcome>& out) {
  const std::string name = action.name;
  if (action.kind == ActionKind::kWriteUsersFile) {
    ActionOutcome write{std::move(action), Outcome::kDone, 0, ""};
    if (targets.users_file_path.empty()) {
      write.outcome = Outcome::kFailed;
      write.detail = "no --users-file configured";
    } else if (Status status =
                   WriteFileAtomically(targets.users_file_path, write.action.users_file_bytes);
               !status.ok()) {
      write.outcome = Outcome::kFailed;
      write.detail = status.message();
    }
    const bool written = write.outcome == Outcome::kDone;
    out.push_back(std::move(write));
    if (!written) return;
  }
  out.push_back(Reload(name, targets));
}

bool IsDeletion(ActionKind kind) {
  return kind == ActionKind::kDeleteStream || kind == ActionKind::kDeleteConsumer;
}

// A deletion's answer: {"success":true} (JSApiStreamDeleteResponse, JSApiConsumerDeleteResponse).
bool Confirmed(std::string_view payload) {
  std::optional<rapidjson::Document> doc = model::json::ParseObject(payload);
  return doc && model::json::Bool(*doc, "success", false);
}

bool IsStreamAction(ActionKind kind) {
  return kind == ActionKind::kCreateStream || kind == ActionKind::kUpdateStream ||
         kind == ActionKind::kDeleteStream;
}

}  // namespace

const char* ToString(Outcome v) {
  return kOutcomeNames.Name(v);
}

ActionOutcome OutcomeOf(Action action, const observers::ApiReply& reply) {
  ActionOutcome out{std::move(action), Outcome::kDone, 0, ""};
  if (!reply.status.ok()) {
    out.outcome = Outcome::kFailed;
    out.detail = reply.status.ToString();
  } else if (auto error = observers::ParseApiError(reply.payload)) {
    out.outcome = Outcome::kRefused;
    out.err_code = error->err_code;
    out.detail = error->description;
  } else if (IsDeletion(out.action.kind) && !Confirmed(reply.payload)) {
    out.outcome = Outcome::kFailed;
    out.detail = "the server did not confirm the deletion";
  }
  return out;
}

std::vector<ActionOutcome> Apply(std::vector<Action> actions, const ApplyTargets& targets) {
  // Every action moves into its outcome, which is reserved once (a write of the users file has
  // two outcomes): a first convergence holds thousands, each with its spec, so neither the
  // actions nor the outcomes are copied or regrown on the way (docs/benchmarks.md, "Memory").
  std::vector<ActionOutcome> out;
  out.reserve(actions.size() + 1);
  std::vector<size_t> stream_actions, consumer_actions;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (KindOf(actions[i].kind) == ObjectKind::kUsersFile) {
      ApplyUsersFile(std::move(actions[i]), targets, out);
    } else if (IsStreamAction(actions[i].kind)) {
      stream_actions.push_back(i);
    } else {
      consumer_actions.push_back(i);
    }
  }

  const ConsumerApi api =
      consumer_actions.empty() ? ConsumerApi::kLegacy : ConsumerApiOf(targets.bus);
  const size_t streams_from = out.size();
  SendAll(actions, stream_actions, targets.bus, api, targets.before_chunk, out);
  std::set<StreamName> not_created;
  for (size_t i = streams_from; i < out.size(); ++i) {
    if (out[i].action.kind == ActionKind::kCreateStream && out[i].outcome != Outcome::kDone) {
      not_created.insert(out[i].action.stream->name);
    }
  }

  std::vector<size_t> sendable, skipped;
  for (size_t i : consumer_actions) {
    (not_created.count(ConsumerStream(actions[i])) != 0 ? skipped : sendable).push_back(i);
  }
  SendAll(actions, sendable, targets.bus, api, targets.before_chunk, out);
  for (size_t i : skipped) {
    std::string detail = "stream " + ConsumerStream(actions[i]).str() + " could not be created";
    out.push_back({std::move(actions[i]), Outcome::kSkipped, 0, std::move(detail)});
  }
  return out;
}

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  const std::filesystem::path target(path);
  const std::string folder =
      target.has_parent_path() ? target.parent_path().string() : std::string(".");
  std::string tmp = folder + "/." + target.filename().string() + ".tmp-XXXXXX";
  // mkstemp creates the file with mode 0600; the explicit fchmod guards against odd umasks.
  UniqueFd fd(new int(mkostemp(tmp.data(), O_CLOEXEC)));
  if (*fd < 0) return Status(Errc::kIo, Errno("create a temporary file in " + folder));
  auto fail = [&](Status status) {
    unlink(tmp.c_str());
    return status;
  };
  if (fchmod(*fd, S_IRUSR | S_IWUSR) != 0) return fail(Status(Errc::kIo, Errno("chmod " + tmp)));
  if (Status status = WriteAll(*fd, bytes); !status.ok()) {
    return fail(Status(Errc::kIo, status.message() + " " + tmp));
  }
  if (fsync(*fd) != 0) return fail(Status(Errc::kIo, Errno("fsync " + tmp)));
  const int closed = close(*fd);
  *fd = -1;
  if (closed != 0) return fail(Status(Errc::kIo, Errno("close " + tmp)));
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(Status(Errc::kIo, Errno("rename to " + path)));
  }
  return FsyncFolder(folder);
}

const char* ToString(SignalRefusal v) {
  return kSignalRefusalNames.Name(v);
}

SignalRefusal CheckServerProcess(const observers::ProcessInfo& process, pid_t self,
                                 std::string* why) {
  const std::string pid = "pid " + std::to_string(process.pid);
  if (process.state == observers::ProcessState::kZombie) {
    *why = pid + " has exited (a stale pid file)";
    return SignalRefusal::kStale;
  }
  if (process.pid == self) {
    *why = pid + " is this process, not nats-server (a stale pid file whose PID was reused)";
    return SignalRefusal::kForeign;
  }
  constexpr const char* kServer = "nats-server";
  if (process.program == kServer || process.exe_name == kServer) return SignalRefusal::kNone;
  const std::string& name = process.program.empty() ? process.exe_name : process.program;
  *why = pid + " is " + (name.empty() ? std::string("an unnamed process") : "'" + name + "'") +
         ", not nats-server (a stale pid file whose PID was reused)";
  return SignalRefusal::kForeign;
}

ReloadSignal SignalReload(const std::string& pid_file) {
  ReloadSignal out;
  // Without blocking: a FIFO in the pid file's place is refused, not waited on.
  Result<std::string> read = observers::ReadRegularFile(pid_file, "pid file", 4096);
  if (!read.ok()) {
    out.status = read.status();
    return out;
  }
  const std::string& content = *read;
  size_t begin = content.find_first_not_of(" \t\r\n");
  size_t end = content.find_last_not_of(" \t\r\n");
  const std::string digits =
      begin == std::string::npos ? "" : content.substr(begin, end - begin + 1);
  const bool numeric = !digits.empty() && digits.size() <= 9 &&
                       digits.find_first_not_of("0123456789") == std::string::npos;
  const long pid = numeric ? std::stol(digits) : 0;
  if (pid <= 1) {
    out.status = Status(Errc::kInvalidArgument, "pid file " + pid_file + " holds no pid");
    return out;
  }
  out.pid = static_cast<pid_t>(pid);
  Result<observers::ProcessInfo> process = observers::ReadProcess(out.pid);
  std::string why;
  if (!process.ok()) {
    if (process.status().code() == Errc::kUnavailable) out.refusal = SignalRefusal::kStale;
    why = "pid " + std::to_string(pid) +
          (out.refusal == SignalRefusal::kStale ? " is not running (a stale pid file)"
                                                : ": " + process.status().message());
  } else {
    out.refusal = CheckServerProcess(*process, getpid(), &why);
  }
  if (!process.ok() || out.refusal != SignalRefusal::kNone) {
    out.status = Status(out.refusal == SignalRefusal::kStale     ? Errc::kUnavailable
                        : out.refusal == SignalRefusal::kForeign ? Errc::kRefused
                                                                 : Errc::kIo,
                        "not signalled: " + pid_file + " names " + why);
    return out;
  }
  if (kill(out.pid, SIGHUP) != 0) {
    if (errno == ESRCH) out.refusal = SignalRefusal::kStale;  // it exited since it was read
    out.status =
        Status(errno == ESRCH ? Errc::kUnavailable : Errc::kIo,
               Errno("SIGHUP to nats-server pid " + std::to_string(pid) + " from " + pid_file));
  }
  return out;
}

Status ConfirmReload(const std::string& monitor_url, int64_t before_unix_ns,
                     std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool reached = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    observers::ObservedServer server = observers::ObserveServer(
        monitor_url,
        std::max(std::chrono::milliseconds(1), std::min(left, kMonitorRequestTimeout)));
    reached = reached || server.reachable;
    if (server.reachable && server.config_load_time_unix_ns > before_unix_ns) {
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() + kConfirmPollInterval >= deadline) break;
    std::this_thread::sleep_for(kConfirmPollInterval);
  }
  if (!reached) {
    return Status(Errc::kUnavailable, "reload not confirmed: monitor unreachable");
  }
  return Status(Errc::kTimeout, "reload not confirmed: the server did not load the file within " +
                                    std::to_string(timeout.count()) + "ms (rejected?)");
}

}  // namespace mesh::reconciler
