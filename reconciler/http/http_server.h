// The daemon's one HTTP listener (Boost.Beast, asynchronous). It only does I/O: each request
// is parsed with limits and a deadline, handed to the pure HandleRequest, and the reply written.
// No cnats call happens here, and nothing a client sends can reach the reconcile loop except
// through HttpState.
//
// With TLS (HttpServerOptions::tls, listener_tls.h) every connection starts with a TLS handshake
// that must finish within `handshake_timeout` (a client that opens TCP and never completes it is
// cut off); each connection uses the certificate in force when it was accepted (a rotated one
// from the next connection on). A plain HTTP request to a TLS listener gets a plaintext 400 that
// says to use https://, then the connection is closed. After the handshake everything below
// applies unchanged; an error reply is followed by a TLS close_notify.
//
// Per connection: a read deadline (a slow or silent client is cut off; others are served
// meanwhile), a header limit and a body limit (413 for a body, 431 for headers over the limit),
// 400 for a malformed request, then the connection is closed; keep-alive otherwise. At most
// `max_connections` connections at once, and `max_connections_per_client` from one address.
// At a cap, a new connection evicts an idle connection (one that has not delivered a whole
// request: silent, dribbling, kept alive after a reply): at the per-address cap that address's
// idle longest, at `max_connections` the idle longest of the address holding the most
// connections. It is closed on accept only when every connection in scope is busy (a handler
// running, a reply being written). So probes are answered whatever idle clients do, from however
// many addresses, as long as the probe's address holds fewer connections than the flood's. The
// header must arrive within `header_timeout`.
//
// Threads: `threads` I/O threads run every connection (each on its own strand). No handler
// blocks: POST /reconcile waits for its pass without a thread (HandleRequestAsync), answered
// when the pass finishes or 504 after `forced_pass_timeout`; its connection is busy meanwhile
// (never evicted), so the daemon bounds such waiters below `max_connections` (the loop's
// max_waiting_requests) to leave room for probes.
//
// Ownership: HttpServer owns its io_context, acceptor and threads; it does not own the
// HttpState, which must outlive Stop. Thread-safety: Start/Stop from one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "model/result.h"
#include "reconciler/http/http_handler.h"
#include "reconciler/http/listener_tls.h"

namespace mesh::reconciler {

struct ListenAddress {
  std::string host;  // an IP literal ("127.0.0.1", "::1", "0.0.0.0"); "localhost" -> 127.0.0.1
  int port = 0;      // 0: any free port
  bool loopback = false;
};

// "127.0.0.1:9464", "[::1]:9464", "localhost:9464", ":9464" (all interfaces).
Result<ListenAddress> ParseListenAddress(const std::string& text);

struct HttpServerOptions {
  std::chrono::milliseconds handshake_timeout{10000};  // TLS only: from accept to handshake done
  std::chrono::milliseconds read_timeout{10000};       // the whole request, header and body
  // From accept (or the previous reply) to the end of the request's header: a connection that
  // sends nothing, or dribbles its request line, is cut off after this, not after read_timeout.
  std::chrono::milliseconds header_timeout{3000};
  std::chrono::milliseconds write_timeout{10000};
  size_t max_header_bytes = 16 * 1024;
  size_t max_body_bytes = 48 * 1024;  // header + body at most 64 KiB
  size_t max_connections = 256;
  // Connections from one client address at once (eviction as above). One client cannot take
  // the whole cap with busy connections.
  size_t max_connections_per_client = 64;
  int threads = 4;
  // How long POST /reconcile waits for its pass before the 504.
  std::chrono::milliseconds forced_pass_timeout{60000};
  // Null: plain HTTP. Otherwise HTTPS with these (reloadable) credentials, shared with the
  // daemon; the server calls Current() once per accepted connection.
  std::shared_ptr<ListenerTls> tls;
};

class HttpServer {
 public:
  // Binds and starts serving; the error names the address (bind refused, port in use).
  static Result<std::unique_ptr<HttpServer>> Start(const ListenAddress& address,
                                                   const HttpState& state,
                                                   HttpServerOptions options = {});
  ~HttpServer();  // Stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Closes the listener and every connection, and joins the threads. Idempotent.
  void Stop();
  int port() const;  // the bound port (useful when started with port 0)

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::reconciler
