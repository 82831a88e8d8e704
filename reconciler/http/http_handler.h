// The daemon's HTTP API as a pure function: HandleRequest maps one parsed request to one
// response, reading the daemon only through the HttpState interface. No socket, no clock, no
// cnats call: the Beast server (http_server.h) does the I/O and calls this.
//
//   GET  /metrics     Prometheus text (version 0.0.4)
//   GET  /healthz     200 "ok" while the loop beats; 503 + reason otherwise
//   GET  /readyz      200 "ready" when records valid, bus reachable and the last pass finished
//                     ok; 503 + reason otherwise
//   GET  /drift       the last pass's report as JSON (503 before the first pass), with the hold
//                     now in force first: "hold":{"held":B[,"until","until_unix_ms","reason","by"]}
//   POST /reconcile   runs a pass that starts after the request; 200 + its report (JSON);
//                     504 when none finished in time, 503 when too many wait or shutting down.
//                     Requests that arrive while a pass runs share the next pass (and its
//                     report); a waiting request holds no server thread (HandleRequestAsync)
//   POST /hold?for=D[&reason=R][&scope=bus|pod]
//                     observe only for D (ParseDuration; more than 0, at most kMaxHold); 200 +
//                     {"schema":"mesh-reconciler/hold/v1","held":true,"until":"<RFC 3339>",
//                      "until_unix_ms":N,"reason":R,"by":A,"scope":S[,"published":B,...]}
//                     scope=bus (the default with --lease): every instance on the bus holds
//                     (the record in the lease's bucket); scope=pod: this instance alone
//   POST /release[?reason=R]
//                     ends a hold; 200 + {"schema":"mesh-reconciler/release/v1","held":false,
//                      "was_held":B}
//
// Query values are percent-decoded ('+' is a space). A reason is at most kMaxReasonBytes of
// UTF-8 text without control characters (it goes into log lines). "by" is the client's address
// as the listener saw it (HttpRequest::peer): the one token is shared, so the address is what
// tells one caller from another.
//
// Every POST needs "Authorization: Bearer <token>". When no token is configured every POST is
// refused with 403 (the read-only endpoints stay open): there is no unauthenticated way to
// change what the reconciler does, not even on loopback. A missing or wrong token gets 401 with
// no detail. The token is compared as SHA-256 digests with CRYPTO_memcmp (constant time, equal
// lengths). Unknown path: 404. Known path, wrong method: 405 with an Allow header. A target that
// is not an absolute path, or a bad query on a POST: 400.
//
// Thread-safety: HandleRequest is reentrant; HttpState implementations must be thread-safe
// (the server calls them from several I/O threads).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/result.h"
#include "reconciler/http/daemon_view.h"

namespace mesh::reconciler {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // "/hold?for=30m"
  std::string authorization;  // the Authorization header's value; empty when absent
  std::string body;
  std::string peer;  // the client's address and port ("127.0.0.1:51234"); empty when unknown
};

inline constexpr size_t kMaxReasonBytes = 200;
// Why a hold's or release's reason is not acceptable, or "" when it is: at most
// kMaxReasonBytes of valid UTF-8 without control characters (C0, DEL, C1), what may go into a
// log line as a person's words. The one check for the endpoint and for the CLI, which refuses
// before sending.
std::string HoldReasonProblem(std::string_view reason);
inline constexpr const char* kHoldSchema = "mesh-reconciler/hold/v1";
inline constexpr const char* kReleaseSchema = "mesh-reconciler/release/v1";

struct HttpReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra: Allow, WWW-Authenticate
  // A HEAD's reply: the GET's status and headers, no body; the Content-Length the GET's body
  // would have (RFC 9110 9.3.2), which the server sends in place of the empty body's.
  std::optional<size_t> head_length;
};

// What the handler may read and ask of the daemon. Methods are const: the object is a view,
// and the requests it forwards (passes, holds) go to the thread-safe loop.
class HttpState {
 public:
  virtual ~HttpState() = default;
  virtual std::string MetricsText() const = 0;
  virtual Health health() const = 0;
  virtual Readiness readiness() const = 0;
  // Null before the first pass.
  virtual std::shared_ptr<const std::string> LastReportJson() const = 0;
  // The SHA-256 digest (32 raw bytes) of the admin token; nullopt when none is configured.
  virtual std::optional<std::string> TokenDigest() const = 0;
  // Whether a token file was configured (--token-file): then a missing digest means its token
  // is unusable (empty, weak, unreadable), which the 403 says instead of "no --token-file".
  virtual bool TokenFileConfigured() const { return false; }
  // Blocks until a pass that started after the call has finished: that pass's report as JSON.
  virtual Result<std::string> ForcePass() const = 0;
  // ForcePass without blocking: `done` is called exactly once, from whatever thread finishes
  // the pass (or at once, on this thread), and must not block. Every waiter of one pass may
  // share the one JSON. Returns a ticket for CancelForcePass (0: `done` was already called).
  // The default calls ForcePass (blocking) for states that have no asynchronous form.
  using ForcePassDone = std::function<void(Result<std::shared_ptr<const std::string>>)>;
  virtual uint64_t ForcePassAsync(ForcePassDone done) const {
    Result<std::string> report = ForcePass();
    if (!report.ok()) {
      done(report.status());
    } else {
      done(std::make_shared<const std::string>(std::move(*report)));
    }
    return 0;
  }
  // Forgets a request whose client gave up (timeout); its `done` is then never called.
  virtual void CancelForcePass(uint64_t /*ticket*/) const {}
  // kBus: this instance is held at once, and the record for every instance is written by the
  // reconcile thread next (HoldState::published says when; hold_state() follows it).
  virtual Result<HoldState> Hold(std::chrono::milliseconds duration, const HoldRequest& request,
                                 HoldScope scope) const = 0;
  // What POST /hold holds without scope=: kBus when the daemon takes part in a lease.
  virtual HoldScope DefaultHoldScope() const { return HoldScope::kPod; }
  virtual bool Release(const HoldRequest& request) const = 0;  // whether a hold was in force
  virtual HoldState hold_state() const = 0;                    // the hold now in force
};

HttpReply HandleRequest(const HttpState& state, const HttpRequest& request);

// HandleRequest without blocking (what the server calls): every request but an accepted
// POST /reconcile is answered through `reply` before this returns; that one is answered from
// the thread that finishes its pass (HttpState::ForcePassAsync), and the ticket returned
// (non-zero) cancels it (HttpState::CancelForcePass) when the caller stops waiting.
uint64_t HandleRequestAsync(const HttpState& state, const HttpRequest& request,
                            const std::function<void(HttpReply)>& reply);
// The answer to a POST /reconcile that no pass served within `waited` (504).
HttpReply ForcePassTimedOut(std::chrono::milliseconds waited);

}  // namespace mesh::reconciler
