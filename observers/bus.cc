#include "observers/bus.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/thread_safety.h"
#include "observers/api_audit.h"
#include "observers/c_handle.h"
#include "observers/cnats_teardown.h"
#include "observers/jetstream_api.h"
#include "observers/nats_error.h"
#include "observers/server_version.h"
#include "observers/tls_trust.h"
#include "observers/url.h"

namespace mesh::observers {
namespace {

using OptionsPtr = CHandle<natsOptions, natsOptions_Destroy>;
using MsgPtr = CHandle<natsMsg, natsMsg_Destroy>;
using InboxPtr = CHandle<natsInbox, natsInbox_Destroy>;

constexpr int64_t kReconnectWaitMs = 250;
constexpr int kForever = -1;  // natsOptions_SetMaxReconnect: keep trying
// Stale-connection detection, also while the daemon is idle (no request to time out): cnats
// sends a PING every interval and calls the connection stale when a PING is due with
// kMaxPingsOut unanswered, so a server that stops answering (SIGSTOP, a partition that drops
// packets) is noticed at most (kMaxPingsOut + 1) intervals after its last PONG. The interval is
// the request timeout over (kMaxPingsOut + 1): noticed within one request timeout, and a PONG
// may be late by two thirds of it (a loaded server) before the connection is called stale. At
// least kMinPingIntervalMs (a very short request timeout is then noticed within 0.75 s). A
// request in flight on a frozen server may now end as "connection lost" rather than as a
// timeout: either way it fails within the request timeout.
constexpr int64_t kMinPingIntervalMs = 250;
constexpr int kMaxPingsOut = 2;
// How often RequestMany looks at the connection while it waits for answers.
constexpr auto kConnectionCheck = std::chrono::milliseconds(50);
// Lanes (Spread::kLanes) unused this long are closed at the next request; lanes that failed to
// open are not tried again for as long.
constexpr auto kLaneIdle = std::chrono::minutes(1);

std::string JoinAddresses(const std::vector<std::string>& urls) {
  std::string joined;
  for (const std::string& url : urls) {
    if (!joined.empty()) joined += ",";
    joined += url;
  }
  return joined;
}

int64_t PingIntervalMs(const BusSettings& settings) {
  return std::max<int64_t>(settings.request_timeout.count() / (kMaxPingsOut + 1),
                           kMinPingIntervalMs);
}

// cnats may run a connection's callbacks on its own threads after the connection is destroyed,
// so callbacks never hold a pointer to a BusConnection: they carry an id and look the sink up
// here. Once Unregister returns, the sink is never called again (it runs under the lock).
class SinkRegistry {
 public:
  static SinkRegistry& Get() {
    static SinkRegistry* registry = new SinkRegistry();  // never destroyed: outlives cnats
    return *registry;
  }
  uintptr_t Register(EventSink sink) {
    MutexLock lock(mutex_);
    const uintptr_t id = ++last_id_;
    sinks_.emplace(id, std::move(sink));
    return id;
  }
  void Unregister(uintptr_t id) {
    MutexLock lock(mutex_);
    sinks_.erase(id);
  }
  void Emit(void* closure, BusEvent event, const std::string& subject) {
    MutexLock lock(mutex_);
    auto it = sinks_.find(reinterpret_cast<uintptr_t>(closure));
    if (it != sinks_.end() && it->second) it->second(event, subject);
  }

 private:
  Mutex mutex_;
  uintptr_t last_id_ GUARDED_BY(mutex_) = 0;
  std::unordered_map<uintptr_t, EventSink> sinks_ GUARDED_BY(mutex_);
};

std::string ConnectedUrl(natsConnection* nc) {
  char buffer[512] = {0};
  if (natsConnection_GetConnectedUrl(nc, buffer, sizeof buffer) != NATS_OK) return "";
  return UrlForMessages(buffer);
}

void OnDisconnected(natsConnection*, void* closure) {
  SinkRegistry::Get().Emit(closure, BusEvent::kDisconnected, "");
}
void OnReconnected(natsConnection* nc, void* closure) {
  SinkRegistry::Get().Emit(closure, BusEvent::kReconnected, ConnectedUrl(nc));
}
void OnAdvisory(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  MsgPtr owned(msg);
  SinkRegistry::Get().Emit(closure, BusEvent::kAdvisory, natsMsg_GetSubject(msg));
}
void OnApiAudit(natsConnection*, natsSubscription*, natsMsg* msg, void* closure) {
  MsgPtr owned(msg);
  const std::string_view audit(natsMsg_GetData(msg),
                               static_cast<size_t>(std::max(natsMsg_GetDataLength(msg), 0)));
  if (std::optional<std::string> stream = StreamDeletionAnswered(audit)) {
    SinkRegistry::Get().Emit(closure, BusEvent::kStreamDeletionAnswered, *stream);
  }
}
// The API audits waiting on cnats' thread: each carries a request's whole answer (a stream
// list's page among them), so the bound is in bytes; cnats drops what comes beyond it.
constexpr int kAuditPendingMessages = 65536;
constexpr int kAuditPendingBytes = 8 * 1024 * 1024;

// The request index carried in the last token of a reply subject "<prefix>.<index>".
std::optional<size_t> ReplyIndex(std::string_view subject, std::string_view prefix) {
  if (subject.size() <= prefix.size() + 1 || subject.substr(0, prefix.size()) != prefix ||
      subject[prefix.size()] != '.') {
    return std::nullopt;
  }
  size_t index = 0;
  for (char c : subject.substr(prefix.size() + 1)) {
    if (c < '0' || c > '9') return std::nullopt;
    index = index * 10 + static_cast<size_t>(c - '0');
  }
  return index;
}

// What to do about an Authorization Violation: the two causes on-call meets look alike from the
// server's side ("no password given" and "a wrong one"), not from ours.
std::string AuthAdvice(const BusSettings& settings) {
  if (settings.password.empty()) {
    return "no password was given for user \"" + settings.user +
           "\" (give it in MESH_RECONCILER_PASSWORD or a --password-file)";
  }
  return "the server refused the password given for user \"" + settings.user +
         "\": the users file it loaded does not admit it (a password changed since the file was "
         "rendered, another --user, or another server)";
}

// The connection a BusConnection is, or one of its lanes (Spread::kLanes).
enum class Role { kMain, kLane };

// A connection's options and the TLS observations its handshakes record (null on plaintext).
struct PreparedOptions {
  OptionsPtr options;
  std::shared_ptr<const TlsObservations> tls;
};

// The options of a connection to `urls` (credentials stripped) as settings.user, its replies
// under `inbox_prefix`, named `name`. kMain reconnects forever and reports to the sink behind
// `closure`; a kLane never reconnects and reports nothing. Errors start with `context`.
Result<PreparedOptions> PrepareOptions(const BusSettings& settings,
                                       const std::vector<std::string>& urls,
                                       const std::string& inbox_prefix, const std::string& name,
                                       Role role, void* closure, const std::string& context) {
  PreparedOptions out;
  natsOptions* raw_options = nullptr;
  natsStatus s = natsOptions_Create(&raw_options);
  out.options.reset(raw_options);
  if (s != NATS_OK) return NatsError(s, context);

  std::vector<const char*> servers;
  for (const std::string& url : urls) servers.push_back(url.c_str());
  s = natsOptions_SetServers(out.options.get(), servers.data(), static_cast<int>(servers.size()));
  if (s == NATS_OK && !settings.user.empty()) {
    s = natsOptions_SetUserInfo(out.options.get(), settings.user.c_str(),
                                settings.password.c_str());
  }
  if (s == NATS_OK) s = natsOptions_SetCustomInboxPrefix(out.options.get(), inbox_prefix.c_str());
  // A sync subscription cannot tell which request a "no responders" status answered (cnats
  // drops it), so without responders a request simply times out like any other.
  if (s == NATS_OK) s = natsOptions_DisableNoResponders(out.options.get(), true);
  if (s == NATS_OK) s = natsOptions_SetName(out.options.get(), name.c_str());
  if (s == NATS_OK) {
    s = natsOptions_SetTimeout(out.options.get(), settings.connect_timeout.count());
  }
  if (role == Role::kMain) {
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(out.options.get(), kForever);
    if (s == NATS_OK) s = natsOptions_SetReconnectWait(out.options.get(), kReconnectWaitMs);
  } else if (s == NATS_OK) {
    s = natsOptions_SetAllowReconnect(out.options.get(), false);
  }
  // A frozen server (SIGSTOP, a hung host) keeps its sockets open, so only silence shows it.
  // During a pass RequestMany sees it at the request timeout (answering()); between passes
  // cnats' PINGs (PingIntervalMs, kMaxPingsOut above) mark the connection stale within one
  // request timeout (disconnected, then reconnected when the server answers again). cnats'
  // default (a PING every two minutes, two outstanding) took four minutes; two request timeouts
  // per PING, one outstanding, took up to four.
  if (s == NATS_OK) s = natsOptions_SetPingInterval(out.options.get(), PingIntervalMs(settings));
  if (s == NATS_OK) s = natsOptions_SetMaxPingsOut(out.options.get(), kMaxPingsOut);
  if (role == Role::kMain) {
    if (s == NATS_OK) {
      s = natsOptions_SetDisconnectedCB(out.options.get(), OnDisconnected, closure);
    }
    if (s == NATS_OK) s = natsOptions_SetReconnectedCB(out.options.get(), OnReconnected, closure);
  }
  if (s != NATS_OK) return NatsError(s, context);
  if (TlsModeOf(settings) != TlsMode::kPlain) {
    auto tls = InstallTlsTrust(out.options.get(), settings);
    if (!tls.ok()) return Status(tls.status().code(), context + ": " + tls.status().message());
    out.tls = std::move(*tls);
  }
  return out;
}

// Connects with `prepared`; a refusal (TLS trust, credentials) is kRefused with what to do.
Result<ConnectionPtr> ConnectWith(const PreparedOptions& prepared, const BusSettings& settings,
                                  const std::string& context) {
  natsConnection* raw_connection = nullptr;
  natsStatus s = natsConnection_Connect(&raw_connection, prepared.options.get());
  ConnectionPtr connection(raw_connection);
  if (s != NATS_OK) {
    Status error = NatsError(s, context);
    if (prepared.tls && !prepared.tls->rejection().empty()) {
      error = Status(Errc::kRefused, error.message() + ": " + prepared.tls->rejection());
    } else if (s == NATS_CONNECTION_AUTH_FAILED) {
      error = Status(Errc::kRefused, error.message() + ": " + AuthAdvice(settings));
    }
    return error;
  }
  return connection;
}

// A lane (Spread::kLanes): a further connection to the server the main one is on. The
// connection is closed before the TLS observations its handshakes use are destroyed.
struct Lane {
  std::shared_ptr<const TlsObservations> tls;
  ConnectionPtr connection;
  RetiredSubscriptions retired;  // its batches' reply subscriptions not yet freed
  ~Lane() { CloseConnection(std::move(connection), {}, std::move(retired)); }
};
using Lanes = std::vector<std::unique_ptr<Lane>>;

bool IsConnected(natsConnection* nc) {
  return natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED;
}

// The lanes that failed to open (BusConnection::lane_failures), written by the attempts off
// the owning thread. Shared with them, so it outlives neither side.
class LaneFailureLog {
 public:
  void Note(const Status& error) {
    MutexLock lock(mutex_);
    ++failures_.count;
    failures_.last_error = error.ToString();
  }
  BusConnection::LaneFailures Get() const {
    MutexLock lock(mutex_);
    return failures_;
  }

 private:
  mutable Mutex mutex_;
  BusConnection::LaneFailures failures_ GUARDED_BY(mutex_);
};

// Opens `count` lanes to `url` side by side (each costs the server a bcrypt of our password);
// those that fail are left out, each noted in `failures`. Runs off the owning thread, on its
// own copies.
Lanes OpenLanes(const BusSettings& settings, const std::string& url,
                const std::string& inbox_prefix, int count,
                const std::shared_ptr<LaneFailureLog>& failures) {
  std::vector<std::future<std::unique_ptr<Lane>>> opening;
  for (int i = 1; i <= count; ++i) {
    opening.push_back(std::async(std::launch::async, [&, i]() -> std::unique_ptr<Lane> {
      const std::string context = "open lane " + std::to_string(i) + " to " + UrlForMessages(url);
      auto prepared = PrepareOptions(settings, {url}, inbox_prefix,
                                     settings.user + " lane " + std::to_string(i), Role::kLane,
                                     nullptr, context);
      if (!prepared.ok()) {
        failures->Note(prepared.status());
        return nullptr;
      }
      auto connection = ConnectWith(*prepared, settings, context);
      if (!connection.ok()) {
        failures->Note(connection.status());
        return nullptr;
      }
      auto lane = std::make_unique<Lane>();
      lane->tls = prepared->tls;
      lane->connection = std::move(*connection);
      return lane;
    }));
  }
  Lanes lanes;
  for (auto& one : opening) {
    if (std::unique_ptr<Lane> lane = one.get()) lanes.push_back(std::move(lane));
  }
  return lanes;
}

// One batch shared by the connections that send it: each takes the next request not yet taken.
struct SharedBatch {
  const std::vector<ApiRequest>& requests;
  std::vector<ApiReply>& replies;  // each written only by the connection that took its request
  std::atomic<size_t> next{0};
};

}  // namespace

struct BusConnection::Impl {
  BusSettings settings;
  std::string address;  // the configured servers, for messages: never a credential
  ConnectionPtr connection;
  uintptr_t sink_id = 0;
  std::vector<SubscriptionPtr> advisory_subscriptions;
  RetiredSubscriptions retired;  // the main connection's batch subscriptions not yet freed
  std::atomic<int64_t> requests_sent{0};
  std::shared_ptr<const TlsObservations> tls;  // null on a plaintext connection
  // False from a request that expired with no answer to anything since it was sent (a frozen
  // server) until the next answer.
  std::atomic<bool> answering{true};
  std::string version_url;  // the server server_version was probed on
  std::optional<ServerVersion> version;
  // Lanes (Spread::kLanes), used by the owning thread only: those open, those being opened in
  // the background, when they last carried a batch, and when to try again after none opened.
  Lanes lanes;
  std::future<Lanes> lanes_opening;
  std::chrono::steady_clock::time_point lanes_used;
  std::chrono::steady_clock::time_point lanes_retry_after;
  std::shared_ptr<LaneFailureLog> lane_failures = std::make_shared<LaneFailureLog>();

  ~Impl() {
    // First make sure no callback reaches the sink any more, then tear down cnats' objects: the
    // connection closed before its subscriptions are freed (cnats_teardown.h).
    SinkRegistry::Get().Unregister(sink_id);
    CloseConnection(std::move(connection), std::move(advisory_subscriptions), std::move(retired));
  }

  std::string InboxPrefix() const {
    return settings.user.empty() ? std::string("_INBOX") : "_INBOX." + settings.user;
  }

  // The lanes a kLanes batch may use now, besides the main connection. When none is open,
  // starts opening them in the background (to the server the main connection is on) and
  // returns none: they carry requests from a later batch on.
  std::vector<Lane*> UsableLanes();
  void CloseIdleLanes();
  // Sends requests of `batch` on `connection`, each taken as the next not yet taken, until none
  // is left, keeping settings.max_in_flight outstanding. Returns why it stopped taking them:
  // ok when none was left; else the status the requests nobody took should carry.
  // Its reply subscription is given up through `retired`, the connection's.
  Status RunLane(natsConnection* connection, RetiredSubscriptions& retired, SharedBatch& batch);
};

std::vector<Lane*> BusConnection::Impl::UsableLanes() {
  const auto now = std::chrono::steady_clock::now();
  if (lanes_opening.valid() &&
      lanes_opening.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    lanes = lanes_opening.get();
    lanes_used = now;
    if (lanes.empty()) lanes_retry_after = now + kLaneIdle;
  }
  std::erase_if(lanes, [](const std::unique_ptr<Lane>& lane) {
    return !IsConnected(lane->connection.get());
  });
  if (lanes.empty()) {
    char buffer[512] = {0};
    if (!lanes_opening.valid() && now >= lanes_retry_after &&
        natsConnection_GetConnectedUrl(connection.get(), buffer, sizeof buffer) == NATS_OK &&
        buffer[0] != 0) {
      lanes_opening = std::async(std::launch::async, OpenLanes, settings, StripUserInfo(buffer),
                                 InboxPrefix(), settings.lanes - 1, lane_failures);
    }
    return {};
  }
  lanes_used = now;
  std::vector<Lane*> out;
  for (const auto& lane : lanes) out.push_back(lane.get());
  return out;
}

void BusConnection::Impl::CloseIdleLanes() {
  if (!lanes.empty() && std::chrono::steady_clock::now() - lanes_used > kLaneIdle) lanes.clear();
}

BusConnection::BusConnection() : impl_(std::make_unique<Impl>()) {}
BusConnection::~BusConnection() = default;

Result<std::unique_ptr<BusConnection>> BusConnection::Connect(const BusSettings& settings,
                                                              EventSink events) {
  std::unique_ptr<BusConnection> bus(new BusConnection());
  Impl& impl = *bus->impl_;
  impl.settings = settings;
  std::vector<std::string> urls;
  std::vector<std::string> shown;  // for messages: never a query string
  for (const std::string& url : settings.urls) {
    urls.push_back(StripUserInfo(url));
    shown.push_back(UrlForMessages(url));
  }
  impl.address = JoinAddresses(shown);
  if (urls.empty()) return Status(Errc::kInvalidArgument, "no bus address configured");
  for (const std::string& url : settings.urls) {
    // A query, a path or ';' parameters may carry credentials (?user=u&pass=S, ;pass=S, /S):
    // refused like userinfo (which is stripped), never sent or shown.
    if (std::optional<std::string> part = RefusedUrlPart(StripUserInfo(url), UrlPath::kRefused)) {
      return Status(Errc::kInvalidArgument,
                    "bus address: " + *part +
                        " is refused (it may carry credentials; the address is not shown; "
                        "give the user and password as settings)");
    }
  }
  const std::string context = "connect to " + impl.address;
  const TlsMode tls_mode = TlsModeOf(settings);
  if (tls_mode == TlsMode::kPinned) {
    // Before cnats sends CONNECT (and the password) anywhere: see tls_trust.h.
    if (Status s = PreflightPinned(urls, settings.pinned_cert_file, settings.connect_timeout);
        !s.ok()) {
      return Status(s.code(), context + ": " + s.message());
    }
  }
  impl.sink_id = SinkRegistry::Get().Register(std::move(events));
  void* closure = reinterpret_cast<void*>(impl.sink_id);

  auto prepared = PrepareOptions(settings, urls, impl.InboxPrefix(), settings.user, Role::kMain,
                                 closure, context);
  if (!prepared.ok()) return prepared.status();
  impl.tls = prepared->tls;
  auto connection = ConnectWith(*prepared, settings, context);
  if (!connection.ok()) return connection.status();
  impl.connection = std::move(*connection);
  return bus;
}

bool BusConnection::connected() const {
  return IsConnected(impl_->connection.get());
}

bool BusConnection::reconnecting() const {
  return natsConnection_Status(impl_->connection.get()) == NATS_CONN_STATUS_RECONNECTING;
}

uint64_t BusConnection::reconnects() const {
  natsStatistics* raw = nullptr;
  if (natsStatistics_Create(&raw) != NATS_OK) return 0;
  const std::unique_ptr<natsStatistics, decltype(&natsStatistics_Destroy)> stats(
      raw, &natsStatistics_Destroy);
  uint64_t in_msgs = 0, in_bytes = 0, out_msgs = 0, out_bytes = 0, count = 0;
  if (natsConnection_GetStats(impl_->connection.get(), stats.get()) != NATS_OK ||
      natsStatistics_GetCounts(stats.get(), &in_msgs, &in_bytes, &out_msgs, &out_bytes, &count) !=
          NATS_OK) {
    return 0;
  }
  return count;
}

bool BusConnection::answering() const {
  return impl_->answering.load();
}

std::string BusConnection::connected_url() const {
  return ConnectedUrl(impl_->connection.get());
}

std::optional<int64_t> BusConnection::certificate_expiry() const {
  if (!impl_->tls) return std::nullopt;
  const std::optional<CertificateFacts> presented = impl_->tls->presented();
  if (!presented) return std::nullopt;
  return presented->not_after_unix;
}

natsConnection* BusConnection::native_handle() const {
  return impl_->connection.get();
}

int64_t BusConnection::requests_sent() const {
  return impl_->requests_sent.load();
}

std::optional<ServerVersion> BusConnection::server_version() {
  Impl& impl = *impl_;
  const std::string url = connected_url();
  if (url.empty()) return impl.version;
  if (url != impl.version_url) {
    Result<ServerVersion> probed = ProbeServerVersion(url, impl.settings.connect_timeout);
    impl.version = probed.ok() ? std::optional<ServerVersion>(*probed) : std::nullopt;
    impl.version_url = probed.ok() ? url : std::string();
  }
  return impl.version;
}

Status BusConnection::Impl::RunLane(natsConnection* nc, RetiredSubscriptions& retired,
                                    SharedBatch& batch) {
  using Clock = std::chrono::steady_clock;
  const std::vector<ApiRequest>& requests = batch.requests;
  std::vector<ApiReply>& replies = batch.replies;

  // One subscription per connection and batch: "<inbox prefix>.<nuid>.*", reply
  // "<...>.<index>".
  natsInbox* raw_inbox = nullptr;
  natsStatus s = natsInbox_Create(&raw_inbox);
  InboxPtr inbox(raw_inbox);
  if (s != NATS_OK) return NatsError(s, "create inbox");
  std::string token(inbox.get());
  token = token.substr(token.rfind('.') + 1);  // "_INBOX.<nuid>" -> "<nuid>"
  const std::string reply_prefix = InboxPrefix() + "." + token;
  const std::string wildcard = reply_prefix + ".*";

  natsSubscription* raw_sub = nullptr;
  s = natsConnection_SubscribeSync(&raw_sub, nc, wildcard.c_str());
  SubscriptionPtr sub(raw_sub);
  // Set when a request expired with no answer at all since it was sent: the bus stopped
  // answering (a frozen server), so nothing more is sent into it.
  bool stalled = false;
  // However the batch ends, answers may still come on the subscription (duplicates, late ones):
  // it is given up without freeing it under cnats' read loop. A flush proves the read loop past
  // it, except on a lost or stalled connection, where it waits for a later one.
  struct GiveUp {
    natsConnection* nc;
    RetiredSubscriptions& retired;
    SubscriptionPtr& sub;
    const bool& stalled;
    std::chrono::milliseconds timeout;
    ~GiveUp() {
      const bool answering = IsConnected(nc) && !stalled;
      retired.Retire(
          nc, std::move(sub),
          answering ? RetiredSubscriptions::Flush::kTry : RetiredSubscriptions::Flush::kSkip,
          timeout);
    }
  } give_up{nc, retired, sub, stalled, settings.request_timeout};
  if (s != NATS_OK) return NatsError(s, "subscribe replies on " + address);

  const int max_in_flight = std::max(1, settings.max_in_flight);
  const auto timeout = settings.request_timeout;
  std::map<size_t, Clock::time_point> outstanding;  // index -> deadline
  bool taking = true;
  Status stopped = Status::Ok();
  Clock::time_point last_answer = Clock::time_point::min();
  while (taking || !outstanding.empty()) {
    if (!IsConnected(nc)) {
      // cnats would queue what we publish until it reconnects and let every request run to its
      // deadline: fail at once instead (the next pass sees what really happened).
      for (const auto& [index, deadline] : outstanding) {
        replies[index].status =
            Status(Errc::kUnavailable, "connection to " + address + " lost before the answer");
      }
      return Status(Errc::kUnavailable, "not sent: not connected to " + address);
    }
    if (stalled && taking) {
      taking = false;
      stopped = Status(Errc::kUnavailable, "not sent: " + address +
                                               " stopped answering (no answer within " +
                                               std::to_string(timeout.count()) + "ms)");
    }
    while (taking && static_cast<int>(outstanding.size()) < max_in_flight) {
      const size_t index = batch.next.fetch_add(1);
      if (index >= requests.size()) {
        taking = false;
        break;
      }
      const ApiRequest& request = requests[index];
      const std::string reply_subject = reply_prefix + "." + std::to_string(index);
      s = natsConnection_PublishRequest(nc, request.subject.c_str(), reply_subject.c_str(),
                                        request.payload.data(),
                                        static_cast<int>(request.payload.size()));
      if (s != NATS_OK) {
        replies[index].status = NatsError(s, "publish " + request.subject);
      } else {
        requests_sent.fetch_add(1);
        outstanding.emplace(index, Clock::now() + timeout);
      }
    }
    if (outstanding.empty()) continue;

    Clock::time_point earliest = Clock::time_point::max();
    for (const auto& [index, deadline] : outstanding) earliest = std::min(earliest, deadline);
    // Wake at least every kConnectionCheck to notice a lost connection.
    const auto wait =
        std::min(std::chrono::duration_cast<std::chrono::milliseconds>(earliest - Clock::now()),
                 kConnectionCheck);
    natsMsg* raw_msg = nullptr;
    s = natsSubscription_NextMsg(&raw_msg, sub.get(), std::max<int64_t>(1, wait.count()));
    MsgPtr msg(raw_msg);
    if (s == NATS_OK) {
      last_answer = Clock::now();
      answering.store(true);
      const std::optional<size_t> index = ReplyIndex(natsMsg_GetSubject(msg.get()), reply_prefix);
      if (index && outstanding.erase(*index) == 1) {  // else a stray or late answer
        replies[*index].payload.assign(natsMsg_GetData(msg.get()),
                                       static_cast<size_t>(natsMsg_GetDataLength(msg.get())));
      }
    } else if (s != NATS_TIMEOUT) {
      // The subscription or the connection is gone: every outstanding request has failed.
      const Status error = NatsError(s, "wait for replies on " + address);
      for (const auto& [index, deadline] : outstanding) replies[index].status = error;
      outstanding.clear();
    }
    const auto now = Clock::now();
    for (auto it = outstanding.begin(); it != outstanding.end();) {
      if (it->second > now) {
        ++it;
        continue;
      }
      if (last_answer < it->second - timeout) {  // silent since it was sent
        stalled = true;
        answering.store(false);
      }
      replies[it->first].status =
          Status(Errc::kTimeout, "no answer from " + requests[it->first].subject);
      it = outstanding.erase(it);
    }
  }
  return stopped;
}

std::vector<ApiReply> BusConnection::RequestMany(const std::vector<ApiRequest>& requests,
                                                 Spread spread) {
  Impl& impl = *impl_;
  impl.CloseIdleLanes();
  std::vector<ApiReply> replies(requests.size());
  if (requests.empty()) return replies;
  SharedBatch batch{requests, replies};
  std::vector<Lane*> lanes;
  if (spread == Spread::kLanes && impl.settings.lanes > 1 && connected() &&
      requests.size() > static_cast<size_t>(std::max(1, impl.settings.max_in_flight)) &&
      HandlesApiRequestsInPlace(server_version())) {
    lanes = impl.UsableLanes();
  }
  std::vector<std::future<Status>> others;
  for (Lane* lane : lanes) {
    others.push_back(std::async(std::launch::async, [&impl, &batch, lane] {
      return impl.RunLane(lane->connection.get(), lane->retired, batch);
    }));
  }
  const Status stopped = impl.RunLane(impl.connection.get(), impl.retired, batch);
  for (auto& other : others) other.get();  // a lane that stopped left its share to the others
  // What nobody took (every connection stopped) carries why the main connection stopped.
  for (size_t i = std::min(batch.next.load(), requests.size()); i < requests.size(); ++i) {
    replies[i].status = stopped;
  }
  return replies;
}

int BusConnection::lanes_open() const {
  int open = 0;
  for (const auto& lane : impl_->lanes) {
    open += IsConnected(lane->connection.get()) ? 1 : 0;
  }
  return open;
}

std::optional<uint64_t> BusConnection::client_id() const {
  uint64_t cid = 0;
  if (!connected() || natsConnection_GetClientID(impl_->connection.get(), &cid) != NATS_OK) {
    return std::nullopt;
  }
  return cid;
}

BusConnection::LaneFailures BusConnection::lane_failures() const {
  return impl_->lane_failures->Get();
}

ApiReply BusConnection::Request(const ApiRequest& request) {
  return std::move(RequestMany({request}).front());
}

Status BusConnection::SubscribeAdvisories(DeletionAnswers answers) {
  Impl& impl = *impl_;
  void* closure = reinterpret_cast<void*>(impl.sink_id);
  struct Wanted {
    const char* subject;
    natsMsgHandler handler;
  };
  std::vector<Wanted> wanted = {{jsapi::kStreamAdvisories, OnAdvisory},
                                {jsapi::kConsumerAdvisories, OnAdvisory}};
  if (answers == DeletionAnswers::kForwarded) wanted.push_back({jsapi::kApiAudits, OnApiAudit});
  for (const Wanted& w : wanted) {
    natsSubscription* raw_sub = nullptr;
    natsStatus s =
        natsConnection_Subscribe(&raw_sub, impl.connection.get(), w.subject, w.handler, closure);
    // Kept from here on even when the next step fails: messages may already come on it, so it
    // is freed only after the connection is closed (cnats_teardown.h).
    if (raw_sub != nullptr) impl.advisory_subscriptions.emplace_back(raw_sub);
    if (s == NATS_OK && w.handler == OnApiAudit) {
      s = natsSubscription_SetPendingLimits(raw_sub, kAuditPendingMessages, kAuditPendingBytes);
    }
    if (s != NATS_OK) {
      return NatsError(s, std::string("subscribe ") + w.subject + " on " + impl.address);
    }
  }
  // Make sure the server has the interest before anyone relies on it.
  natsStatus s =
      natsConnection_FlushTimeout(impl.connection.get(), impl.settings.request_timeout.count());
  if (s != NATS_OK) return NatsError(s, "flush " + impl.address);
  return Status::Ok();
}

}  // namespace mesh::observers
