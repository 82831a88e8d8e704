#include "reconciler/http/http_server.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <list>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/thread_safety.h"
#include "observers/url.h"
#include "reconciler/base/log.h"
#include "reconciler/http/http_wire.h"

namespace mesh::reconciler {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// After an error reply the connection is closed; what the client is still sending is read and
// dropped for a moment first, so that the reply is not lost to a TCP reset.
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr size_t kMaxLingerBytes = 1024 * 1024;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

enum class Persist { kKeepAlive, kClose };

using Clock = std::chrono::steady_clock;

// What admission knows of a connection: whether it is idle, that is, has not delivered a whole
// request (it is in its TLS handshake, waiting for or reading a request, or lingering after an
// error reply), and how to close it from another thread. A connection that is handling a
// request or writing its reply is busy and never evicted.
class Connection {
 public:
  virtual ~Connection() = default;
  virtual void Evict() = 0;  // any thread: the close is posted onto the connection's strand

  void SetIdle(bool idle) {
    if (idle) idle_since_.store(Clock::now().time_since_epoch().count());
    idle_.store(idle);
  }
  bool idle() const { return idle_.load(); }
  Clock::rep idle_since() const { return idle_since_.load(); }

 private:
  std::atomic<bool> idle_{true};
  std::atomic<Clock::rep> idle_since_{Clock::now().time_since_epoch().count()};
};

// Every admitted connection, so that the caps hold and a full listener can make room.
//
// At max_connections_per_client for one address, a new connection evicts that address's
// connection idle longest. At max_connections, it evicts an idle connection of the address that
// holds the most connections (idle longest among those): a flood takes its room from itself,
// never from an address with fewer connections than the flood's, such as the kubelet's one
// probe or Prometheus's one keep-alive connection, however fast the flood turns the listener
// over (a flood from 20 addresses reopened some 250 connections every 100 ms, so the newest
// connection became the idlest within milliseconds: a probe whose request had not yet been read
// was evicted). A new connection is refused only when every connection in scope is busy. What
// cannot be evicted is bounded: a handler that blocks (POST /reconcile) by the loop's waiting
// limit, a reply by write_timeout.
struct AdmissionEntry;

class Admissions {
 public:
  using Slot = std::list<AdmissionEntry>::iterator;

  explicit Admissions(const HttpServerOptions& options) : options_(options) {}

  // Admits `connection` from `client` (evicting as above); false when refused. On success
  // `*slot` is where Leave finds it.
  bool Admit(const std::shared_ptr<Connection>& connection, const std::string& client,
             std::optional<Slot>* slot);
  // Idempotent; `*slot` is cleared (an evicted connection has already left). The connection's
  // destructor calls it first, so an entry's connection is alive while the mutex is held.
  void Leave(std::optional<Slot>* slot);

 private:
  // The idle entry to evict for a newcomer, if any: with `client`, that address's entry idle
  // longest; without, the entry idle longest of the address holding the most entries.
  std::optional<Slot> IdlestLocked(const std::string* client) REQUIRES(mutex_);
  void EraseLocked(Slot slot) REQUIRES(mutex_);

  const HttpServerOptions& options_;
  mutable Mutex mutex_;
  std::list<AdmissionEntry> entries_ GUARDED_BY(mutex_);
  std::unordered_map<std::string, size_t> per_client_ GUARDED_BY(mutex_);
};

// Under the mutex an entry's connection is alive (its destructor waits in Leave), so `raw` may
// be read there. No shared_ptr is released under the mutex: the last one would run the
// destructor, whose Leave would wait for the mutex held by this very thread.
struct AdmissionEntry {
  Connection* raw;
  std::weak_ptr<Connection> owner;        // to keep it alive while its close is posted
  std::optional<Admissions::Slot>* slot;  // the connection's own handle; guarded by the mutex
  std::string client;
};

std::optional<Admissions::Slot> Admissions::IdlestLocked(const std::string* client) {
  std::optional<Slot> idlest;
  size_t held = 0;  // connections held by idlest's address
  Clock::rep since = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (client != nullptr && it->client != *client) continue;
    if (!it->raw->idle()) continue;
    const size_t its_held = client != nullptr ? 0 : per_client_.at(it->client);
    if (!idlest || its_held > held || (its_held == held && it->raw->idle_since() < since)) {
      idlest = it;
      held = its_held;
      since = it->raw->idle_since();
    }
  }
  return idlest;
}

void Admissions::EraseLocked(Slot slot) {
  *slot->slot = std::nullopt;
  auto count = per_client_.find(slot->client);
  if (count != per_client_.end() && --count->second == 0) per_client_.erase(count);
  entries_.erase(slot);
}

bool Admissions::Admit(const std::shared_ptr<Connection>& connection, const std::string& client,
                       std::optional<Slot>* slot) {
  std::shared_ptr<Connection> evicted;
  {
    MutexLock lock(mutex_);
    std::optional<Slot> victim;
    auto count = per_client_.find(client);
    if (count != per_client_.end() && count->second >= options_.max_connections_per_client) {
      victim = IdlestLocked(&client);
      if (!victim) return false;
    } else if (entries_.size() >= options_.max_connections) {
      victim = IdlestLocked(nullptr);
      if (!victim) return false;
    }
    if (victim) {
      // Null when its destructor has begun: it is closing anyway, and leaves no slot behind.
      evicted = (*victim)->owner.lock();
      EraseLocked(*victim);
    }
    entries_.push_back({connection.get(), connection, slot, client});
    *slot = std::prev(entries_.end());
    ++per_client_[client];
  }
  if (evicted) evicted->Evict();  // and `evicted` is released here, outside the mutex
  return true;
}

void Admissions::Leave(std::optional<Slot>* slot) {
  MutexLock lock(mutex_);
  if (*slot) EraseLocked(**slot);
}

// Connections whose request waits for a forced pass (POST /reconcile): no asynchronous
// operation of theirs is pending, so this keeps them alive until they are answered, and the
// server's Stop drops them (with the io_context still alive) when they never are.
class Waiting {
 public:
  void Add(const std::shared_ptr<Connection>& connection) {
    MutexLock lock(mutex_);
    connections_.insert(connection);
  }
  // Returns the entry, released by the caller outside the mutex.
  std::shared_ptr<Connection> Remove(Connection* connection) {
    MutexLock lock(mutex_);
    for (auto it = connections_.begin(); it != connections_.end(); ++it) {
      if (it->get() != connection) continue;
      std::shared_ptr<Connection> kept = *it;
      connections_.erase(it);
      return kept;
    }
    return nullptr;
  }
  std::set<std::shared_ptr<Connection>> TakeAll() {
    MutexLock lock(mutex_);
    return std::exchange(connections_, {});
  }

 private:
  Mutex mutex_;
  std::set<std::shared_ptr<Connection>> connections_ GUARDED_BY(mutex_);
};

struct Shared {
  Shared(const HttpState& s, HttpServerOptions o) : state(s), options(o), admissions(options) {}
  const HttpState& state;
  const HttpServerOptions options;
  Admissions admissions;
  Waiting waiting;
};

// OpenSSL refused the handshake because the client spoke plain HTTP.
bool IsPlainHttp(const beast::error_code& ec) {
  return ec.category() == net::error::get_ssl_category() &&
         ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_HTTP_REQUEST;
}

// One connection, plain (PlainStream) or TLS (TlsStream). Runs on its own strand.
template <class Stream>
class Session : public Connection, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // `context`: the TLS credentials for this connection (null for plain HTTP).
  Session(tcp::socket&& socket, std::shared_ptr<ssl::context> context,
          std::shared_ptr<Shared> shared)
      : context_(std::move(context)),
        stream_(MakeStream(std::move(socket), context_.get())),
        shared_(std::move(shared)) {}
  ~Session() override { shared_->admissions.Leave(&slot_); }

  // Admits this connection from `client` (Admissions::Admit); false: refused, and closed.
  // `peer` (address and port) is what the handler is told of the caller.
  bool Admit(const std::string& client, std::string peer) {
    peer_ = std::move(peer);
    if (shared_->admissions.Admit(this->shared_from_this(), client, &slot_)) return true;
    Close();
    return false;
  }

  void Evict() override {
    net::post(Tcp().get_executor(), [self = this->shared_from_this()] { self->Close(); });
  }

  void Run() {
    net::dispatch(Tcp().get_executor(),
                  beast::bind_front_handler(&Session::Start, this->shared_from_this()));
  }

 private:
  static Stream MakeStream(tcp::socket&& socket, ssl::context* context) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *context);
    } else {
      return Stream(std::move(socket));
    }
  }

  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Start() {
    if constexpr (kTls) {
      Tcp().expires_after(shared_->options.handshake_timeout);
      stream_.async_handshake(
          ssl::stream_base::server,
          beast::bind_front_handler(&Session::OnHandshake, this->shared_from_this()));
    } else {
      Read();
    }
  }

  void OnHandshake(beast::error_code ec) {
    if (!ec) return Read();
    if (IsPlainHttp(ec)) return RefusePlainHttp();
    // Scanners, wrong CAs, timeouts: routine, and the reason carries no secret.
    Log(LogLevel::kDebug, 0, "TLS handshake failed", {{"error", ec.message()}});
    Close();
  }

  // Answers in plaintext on the TCP layer below TLS, then closes.
  void RefusePlainHttp() {
    HttpReply reply;
    reply.status = 400;
    reply.body = "this listener speaks HTTPS: use https://\n";
    BuildResponse(reply, 11, Persist::kClose);
    Tcp().expires_after(shared_->options.write_timeout);
    http::async_write(Tcp(), *response_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        self->LingerTcp();
                      });
  }

  // The header first, within header_timeout (a connection that sends no request, or dribbles
  // it, is cut off soon), then the body within what is left of read_timeout.
  void Read() {
    SetIdle(true);
    parser_.emplace();
    ApplyLimits(*parser_, shared_->options);
    read_deadline_ = std::chrono::steady_clock::now() + shared_->options.read_timeout;
    Tcp().expires_after(std::min(shared_->options.header_timeout, shared_->options.read_timeout));
    http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&Session::OnHeader, this->shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t bytes) {
    if (ec) return OnRead(ec, bytes);
    Tcp().expires_at(read_deadline_);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

  void OnRead(beast::error_code ec, size_t) {
    SetIdle(false);
    if (ec) {
      std::optional<HttpReply> rejection = RejectionFor(ec);
      if (!rejection) return Close();  // end of stream, read timeout, reset
      return Write(*rejection, 11, Persist::kClose);
    }
    const auto& message = parser_->get();
    const HttpRequest request = ToHttpRequest(message, peer_);
    const unsigned version = message.version();
    const Persist persist = message.keep_alive() ? Persist::kKeepAlive : Persist::kClose;
    // The reply comes back through the strand, from this thread at once or, for a forced pass,
    // from the reconcile thread later; meanwhile the connection is busy and holds no thread.
    waiting_ = true;
    shared_->waiting.Add(this->shared_from_this());
    std::weak_ptr<Session> weak = this->shared_from_this();
    auto answer = [weak, version, persist](HttpReply reply) {
      if (std::shared_ptr<Session> self = weak.lock()) {
        net::post(self->Tcp().get_executor(), [self, reply = std::move(reply), version, persist] {
          self->Answer(reply, version, persist);
        });
      }
    };
    try {
      ticket_ = HandleRequestAsync(shared_->state, request, answer);
    } catch (const std::exception& e) {
      // A bug: answer 500 rather than let the exception take the I/O thread (and the process).
      Log(LogLevel::kError, 0, "HTTP handler threw (a bug)", {{"error", e.what()}});
      ticket_ = 0;
      answer(HttpReply{500, "text/plain; charset=utf-8", "internal error\n", {}, {}});
    }
    if (ticket_ != 0) {
      // Waiting for a pass: answered 504 after forced_pass_timeout unless the pass comes first.
      wait_timer_.emplace(Tcp().get_executor());
      wait_timer_->expires_after(shared_->options.forced_pass_timeout);
      wait_timer_->async_wait(
          [self = this->shared_from_this(), version, persist](beast::error_code ec) {
            if (ec || !self->waiting_) return;
            self->shared_->state.CancelForcePass(self->ticket_);
            self->Answer(ForcePassTimedOut(self->shared_->options.forced_pass_timeout), version,
                         persist);
          });
    }
  }

  // On the strand: the first answer to the request in flight is written; a later one (the pass
  // after the timeout's 504) is dropped.
  void Answer(const HttpReply& reply, unsigned version, Persist persist) {
    if (!waiting_) return;
    waiting_ = false;
    ticket_ = 0;
    if (wait_timer_) wait_timer_->cancel();
    std::shared_ptr<Connection> kept = shared_->waiting.Remove(this);
    Write(reply, version, persist);
  }

  void BuildResponse(const HttpReply& reply, unsigned version, Persist persist) {
    response_.emplace(static_cast<http::status>(reply.status), version);
    response_->set(http::field::server, "mesh-reconciler");
    response_->set(http::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) response_->set(name, value);
    response_->body() = reply.body;
    response_->keep_alive(persist == Persist::kKeepAlive);
    response_->prepare_payload();
    // HEAD: the GET's Content-Length, and no body after the headers.
    if (reply.head_length) response_->content_length(*reply.head_length);
  }

  void Write(const HttpReply& reply, unsigned version, Persist persist) {
    BuildResponse(reply, version, persist);
    Tcp().expires_after(shared_->options.write_timeout);
    http::async_write(
        stream_, *response_,
        beast::bind_front_handler(&Session::OnWrite, this->shared_from_this(), persist));
  }

  void OnWrite(Persist persist, beast::error_code ec, size_t) {
    if (ec) return Close();
    if (persist == Persist::kClose) return Linger();
    Read();
  }

  // Closes gracefully within kLingerTime in all: TLS sends its close_notify first.
  void Linger() {
    SetIdle(true);
    Tcp().expires_after(kLingerTime);
    if constexpr (kTls) {
      stream_.async_shutdown(
          [self = this->shared_from_this()](beast::error_code) { self->LingerTcp(); });
    } else {
      LingerTcp();
    }
  }

  void LingerTcp() {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    Drain();
  }

  void Drain() {
    Tcp().async_read_some(net::buffer(drain_),
                          [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                            self->drained_ += n;
                            if (ec || self->drained_ > kMaxLingerBytes) return self->Close();
                            self->Drain();
                          });
  }

  void Close() {
    beast::error_code ignored;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    Tcp().socket().close(ignored);
  }

  std::shared_ptr<ssl::context> context_;  // declared first: outlives the stream that uses it
  Stream stream_;
  std::shared_ptr<Shared> shared_;
  std::optional<Admissions::Slot> slot_;  // guarded by the admissions' mutex
  std::string peer_;                      // set by Admit, before Run
  std::chrono::steady_clock::time_point read_deadline_{};
  beast::flat_buffer buffer_;
  std::optional<RequestParser> parser_;
  std::optional<http::response<http::string_body>> response_;
  std::array<char, 4096> drain_{};
  size_t drained_ = 0;
  // The request in flight (on the strand): not yet answered; its forced-pass ticket, if any.
  bool waiting_ = false;
  uint64_t ticket_ = 0;
  std::optional<net::steady_timer> wait_timer_;
};

}  // namespace

struct HttpServer::Impl {
  Impl(const HttpState& state, HttpServerOptions options)
      : ioc(options.threads),
        accepting(net::make_strand(ioc)),
        acceptor(accepting),
        retry_timer(accepting),
        shared(std::make_shared<Shared>(state, options)) {}

  void Accept() {
    acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) {
        // Out of descriptors, or the like: try again shortly rather than spin.
        Log(LogLevel::kWarn, 0, "accept failed", {{"error", ec.message()}});
        retry_timer.expires_after(kAcceptRetryDelay);
        retry_timer.async_wait([this](beast::error_code wait_ec) {
          if (!wait_ec) Accept();
        });
        return;
      }
      beast::error_code peer_ec;
      const tcp::endpoint peer = socket.remote_endpoint(peer_ec);
      const std::string client = peer_ec ? std::string("?") : peer.address().to_string();
      std::ostringstream peer_text;
      if (!peer_ec) peer_text << peer;  // 127.0.0.1:51234, [::1]:51234
      const std::string peer_name = peer_text.str();
      if (shared->options.tls) {
        auto session = std::make_shared<Session<TlsStream>>(std::move(socket),
                                                            shared->options.tls->Current(), shared);
        if (session->Admit(client, peer_name)) session->Run();
      } else {
        auto session = std::make_shared<Session<PlainStream>>(std::move(socket), nullptr, shared);
        if (session->Admit(client, peer_name)) session->Run();
      }
      Accept();
    });
  }

  net::io_context ioc;
  // The acceptor is not thread-safe, and the I/O threads run its completions: they, the retry
  // timer's and Stop's close all run on this strand, one at a time.
  net::strand<net::io_context::executor_type> accepting;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  std::shared_ptr<Shared> shared;
  std::vector<std::thread> threads;
  int port = 0;
};

Result<ListenAddress> ParseListenAddress(const std::string& text) {
  const bool bracketed = !text.empty() && text.front() == '[';
  std::optional<observers::HostPort> split = observers::SplitHostPort(text);
  if (!split) {
    return Status(Errc::kInvalidArgument,
                  bracketed ? "--listen: expected [IPv6]:PORT"
                            : "--listen: write an IPv6 address as [ADDRESS]:PORT");
  }
  if (!split->port) {
    return Status(Errc::kInvalidArgument,
                  bracketed ? "--listen: expected [IPv6]:PORT" : "--listen: expected HOST:PORT");
  }
  const std::optional<int> port = observers::ParsePort(*split->port);
  if (!port) {
    return Status(Errc::kInvalidArgument, "--listen: the port must be a number from 0 to 65535");
  }
  std::string host = std::move(split->host);
  if (host.empty()) host = "0.0.0.0";
  if (host == "localhost") host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (ec) {
    return Status(Errc::kInvalidArgument,
                  "--listen: \"" + host + "\" is not an IP address (or localhost)");
  }
  return ListenAddress{host, *port, address.is_loopback()};
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  Stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const ListenAddress& address,
                                                      const HttpState& state,
                                                      HttpServerOptions options) {
  auto impl = std::make_unique<Impl>(state, options);
  const std::string where = address.host + ":" + std::to_string(address.port);
  beast::error_code ec;
  const tcp::endpoint endpoint(net::ip::make_address(address.host, ec),
                               static_cast<unsigned short>(address.port));
  if (ec) return Status(Errc::kInvalidArgument, "cannot listen on " + where + ": " + ec.message());
  auto fail = [&](const char* step) {
    return Status(Errc::kIo, "cannot listen on " + where + ": " + step + ": " + ec.message());
  };
  impl->acceptor.open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return fail("reuse_address");
  impl->acceptor.bind(endpoint, ec);
  if (ec) return fail("bind");
  impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  for (int i = 0; i < std::max(1, options.threads); ++i) {
    impl->threads.emplace_back([ioc = &impl->ioc] { ioc->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

void HttpServer::Stop() {
  if (!impl_ || impl_->threads.empty()) return;
  net::post(impl_->accepting, [impl = impl_.get()] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
    impl->retry_timer.cancel();
  });
  impl_->ioc.stop();
  for (auto& thread : impl_->threads) thread.join();
  impl_->threads.clear();
  // Requests still waiting for a pass are dropped with their connections, while the io_context
  // they belong to still exists; a pass that finishes later finds them gone.
  impl_->shared->waiting.TakeAll();
}

int HttpServer::port() const {
  return impl_->port;
}

}  // namespace mesh::reconciler
