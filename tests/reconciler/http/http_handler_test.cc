// HandleRequest on its own, table-driven: every endpoint, methods, tokens, bad paths, holds.
#include "reconciler/http/http_handler.h"

#include <catch2/catch.hpp>

#include "tests/support/http_fakes.h"

namespace mesh::reconciler::test {
namespace {

constexpr const char* kToken = mesh::testing::kFakeAdminToken;
using FakeState = mesh::testing::FakeHttpState;

constexpr const char* kPeer = "10.1.2.3:45678";

HttpRequest Get(std::string target) {
  return {"GET", std::move(target), "", "", kPeer};
}
HttpRequest Post(std::string target, std::string authorization = std::string("Bearer ") + kToken) {
  return {"POST", std::move(target), std::move(authorization), "", kPeer};
}

std::string Header(const HttpReply& reply, const std::string& name) {
  for (const auto& [key, value] : reply.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST_CASE("GET endpoints answer from the state", "[http]") {
  FakeState state;
  HttpReply metrics = HandleRequest(state, Get("/metrics"));
  CHECK(metrics.status == 200);
  CHECK(metrics.body == "mesh_reconciler_bus_connected 1\n");
  CHECK(metrics.content_type.find("text/plain; version=0.0.4") == 0);

  CHECK(HandleRequest(state, Get("/healthz")).status == 200);
  CHECK(HandleRequest(state, Get("/readyz")).body == "ready\n");
  CHECK(HandleRequest(state, Get("/metrics?name[]=x")).status == 200);  // GET queries ignored

  state.health_ = {false, "no loop heartbeat for 300 s"};
  HttpReply health = HandleRequest(state, Get("/healthz"));
  CHECK(health.status == 503);
  CHECK(health.body == "no loop heartbeat for 300 s\n");

  state.readiness_ = {false, "records invalid: modules[0].name: bad"};
  HttpReply ready = HandleRequest(state, Get("/readyz"));
  CHECK(ready.status == 503);
  CHECK(ready.body == "records invalid: modules[0].name: bad\n");
}

TEST_CASE("GET /drift is the last report, 503 before the first pass", "[http]") {
  FakeState state;
  HttpReply none = HandleRequest(state, Get("/drift"));
  CHECK(none.status == 503);
  CHECK(none.content_type == "application/json");
  CHECK(none.body.find("no pass has finished yet") != std::string::npos);
  state.report_ = std::make_shared<const std::string>("{\"pass_id\":3}");
  HttpReply drift = HandleRequest(state, Get("/drift"));
  CHECK(drift.status == 200);
  CHECK(drift.body == "{\"hold\":{\"held\":false},\"pass_id\":3}");
}

// Probes and monitors send HEAD: the GET's status, type and length, without the body.
TEST_CASE("HEAD is answered on every GET endpoint as a GET without its body", "[http]") {
  FakeState state;
  state.report_ = std::make_shared<const std::string>("{\"pass_id\":3}");
  for (const char* target : {"/healthz", "/readyz", "/metrics", "/drift"}) {
    INFO(target);
    const HttpReply get = HandleRequest(state, Get(target));
    const HttpReply head = HandleRequest(state, {"HEAD", target, "", "", kPeer});
    CHECK(head.status == 200);
    CHECK(head.status == get.status);
    CHECK(head.content_type == get.content_type);
    CHECK(head.body.empty());
    CHECK(head.head_length == get.body.size());
    CHECK_FALSE(get.head_length.has_value());
  }
  state.health_ = {false, "no loop heartbeat for 300 s"};
  const HttpReply unhealthy = HandleRequest(state, {"HEAD", "/healthz", "", "", kPeer});
  CHECK(unhealthy.status == 503);
  CHECK(unhealthy.body.empty());
  const HttpReply missing = HandleRequest(state, {"HEAD", "/nope", "", "", kPeer});
  CHECK(missing.status == 404);
  CHECK(missing.body.empty());
  CHECK(state.forced_ == 0);
}

TEST_CASE("Unknown paths are 404, wrong methods 405 with Allow, bad targets 400", "[http]") {
  FakeState state;
  struct Case {
    HttpRequest request;
    int status;
    std::string allow;
  };
  const std::vector<Case> cases = {
      {Get("/"), 404, ""},
      {Get("/metrics/"), 404, ""},
      {Get("/METRICS"), 404, ""},
      {Get("/nope"), 404, ""},
      {Get("/../etc/passwd"), 404, ""},
      {Post("/metrics"), 405, "GET, HEAD"},
      {Get("/reconcile"), 405, "POST"},
      {Get("/hold?for=1m"), 405, "POST"},
      {{"PUT", "/release", "", "", kPeer}, 405, "POST"},
      {{"DELETE", "/drift", "", "", kPeer}, 405, "GET, HEAD"},
      {{"HEAD", "/reconcile", "", "", kPeer}, 405, "POST"},
      {{"HEAD", "/hold?for=1m", "", "", kPeer}, 405, "POST"},
      {Get(""), 400, ""},
      {Get("metrics"), 400, ""},
      {Get("http://example.com/metrics"), 400, ""},
      {Get("*"), 400, ""},
  };
  for (const Case& c : cases) {
    INFO(c.request.method << " " << c.request.target);
    HttpReply reply = HandleRequest(state, c.request);
    CHECK(reply.status == c.status);
    CHECK(Header(reply, "Allow") == c.allow);
  }
  CHECK(state.forced_ == 0);
  CHECK(state.released_ == 0);
}

TEST_CASE("POSTs need the bearer token, 401 says nothing more", "[http]") {
  FakeState state;
  const std::vector<std::string> refused = {
      "",
      "Bearer",
      "Bearer ",
      "Bearer wrong",
      std::string("Bearer ") + kToken + "x",
      std::string("Bearer ") + std::string(kToken).substr(1),
      std::string("Basic ") + kToken,
      kToken,
      std::string("Bearer\t") + kToken,
  };
  for (const std::string& authorization : refused) {
    for (const char* target : {"/reconcile", "/hold?for=5m", "/release"}) {
      INFO(target << " with \"" << authorization << "\"");
      HttpReply reply = HandleRequest(state, Post(target, authorization));
      CHECK(reply.status == 401);
      CHECK(reply.body == "unauthorized\n");
      CHECK(Header(reply, "WWW-Authenticate").find("Bearer") == 0);
    }
  }
  CHECK(state.forced_ == 0);
  CHECK(state.released_ == 0);
  CHECK_FALSE(state.held_for_);
  // The scheme is case-insensitive, surrounding spaces are ignored.
  CHECK(HandleRequest(state, Post("/release", std::string("bearer  ") + kToken + " ")).status ==
        200);
}

TEST_CASE("Without a configured token every POST is refused with 403", "[http]") {
  FakeState state;
  state.digest_.reset();
  for (const char* target : {"/reconcile", "/hold?for=5m", "/release"}) {
    INFO(target);
    CHECK(HandleRequest(state, Post(target)).status == 403);
    CHECK(HandleRequest(state, Post(target, "")).status == 403);
  }
  CHECK(state.forced_ == 0);
  CHECK(HandleRequest(state, Get("/metrics")).status == 200);  // reads stay open
}

TEST_CASE("POST /reconcile answers with the forced pass's report or why not", "[http]") {
  FakeState state;
  HttpReply ok = HandleRequest(state, Post("/reconcile"));
  CHECK(ok.status == 200);
  CHECK(ok.content_type == "application/json");
  CHECK(ok.body == "{\"pass_id\":9}");
  CHECK(state.forced_ == 1);

  state.force_result_ = Status(Errc::kTimeout, "no pass finished within 60 s");
  HttpReply timeout = HandleRequest(state, Post("/reconcile"));
  CHECK(timeout.status == 504);
  CHECK(timeout.body == "{\"error\":\"no pass finished within 60 s\"}\n");

  state.force_result_ = Status(Errc::kUnavailable, "the reconciler is shutting down");
  CHECK(HandleRequest(state, Post("/reconcile")).status == 503);
  CHECK(HandleRequest(state, Post("/reconcile?now=1")).status == 400);
}

TEST_CASE("POST /hold parses durations and bounds them", "[http]") {
  struct Case {
    std::string target;
    int status;
    std::optional<std::chrono::milliseconds> held_for;
  };
  using std::chrono::milliseconds;
  const std::vector<Case> cases = {
      {"/hold?for=30m", 200, milliseconds(30 * 60 * 1000)},
      {"/hold?for=1h30m", 200, milliseconds(90 * 60 * 1000)},
      {"/hold?for=250ms", 200, milliseconds(250)},
      {"/hold?for=24h", 200, milliseconds(24 * 3600 * 1000)},
      {"/hold?for=86400000ms", 200, milliseconds(86400000)},
      {"/hold?for=24h1ms", 400, std::nullopt},
      {"/hold?for=25h", 400, std::nullopt},
      {"/hold?for=0s", 400, std::nullopt},
      {"/hold?for=", 400, std::nullopt},
      {"/hold?for=-5m", 400, std::nullopt},
      {"/hold?for=5", 400, std::nullopt},
      {"/hold?for=5d", 400, std::nullopt},
      {"/hold?for=abc", 400, std::nullopt},
      {"/hold?for=5m&for=6m", 400, std::nullopt},
      {"/hold?for=5m&x=1", 400, std::nullopt},
      {"/hold?duration=5m", 400, std::nullopt},
      {"/hold?for", 400, std::nullopt},
      {"/hold", 400, std::nullopt},
  };
  for (const Case& c : cases) {
    INFO(c.target);
    FakeState state;
    HttpReply reply = HandleRequest(state, Post(c.target));
    CHECK(reply.status == c.status);
    CHECK(state.held_for_ == c.held_for);
    CHECK(reply.content_type == "application/json");
  }
  FakeState state;
  HttpReply held = HandleRequest(state, Post("/hold?for=30m"));
  CHECK(held.body ==
        "{\"schema\":\"mesh-reconciler/hold/"
        "v1\",\"held\":true,\"until\":\"2025-11-29T10:55:30.123Z\","
        "\"until_unix_ms\":1764413730123,\"reason\":\"\",\"by\":\"10.1.2.3:45678\","
        "\"scope\":\"pod\"}\n");
  CHECK(state.hold_request_.by == kPeer);
  CHECK(state.hold_request_.reason.empty());
}

TEST_CASE("POST /hold takes the daemon's scope, or the one named", "[http]") {
  using mesh::reconciler::HoldScope;
  struct Case {
    std::string target;
    HoldScope daemon_default;
    int status;
    HoldScope scope;  // as the state got it, when 200
  };
  const std::vector<Case> cases = {
      {"/hold?for=30m", HoldScope::kPod, 200, HoldScope::kPod},
      {"/hold?for=30m", HoldScope::kBus, 200, HoldScope::kBus},
      {"/hold?for=30m&scope=pod", HoldScope::kBus, 200, HoldScope::kPod},
      {"/hold?for=30m&scope=bus", HoldScope::kBus, 200, HoldScope::kBus},
      {"/hold?scope=bus&for=30m&reason=restore", HoldScope::kBus, 200, HoldScope::kBus},
      {"/hold?for=30m&scope=cluster", HoldScope::kBus, 400, HoldScope::kPod},
      {"/hold?for=30m&scope=", HoldScope::kBus, 400, HoldScope::kPod},
      {"/hold?for=30m&scope=bus&scope=pod", HoldScope::kBus, 400, HoldScope::kPod},
  };
  for (const Case& c : cases) {
    INFO(c.target);
    FakeState state;
    state.default_scope_ = c.daemon_default;
    HttpReply reply = HandleRequest(state, Post(c.target));
    CHECK(reply.status == c.status);
    CHECK(state.held_ == (c.status == 200 ? 1 : 0));
    if (c.status == 200) {
      CHECK(state.hold_scope_ == c.scope);
      CHECK(reply.body.find(std::string("\"scope\":\"") + ToString(c.scope) + "\"") !=
            std::string::npos);
    }
  }
}

TEST_CASE("A hold's reason is percent-decoded and bounded, who is the client's address", "[http]") {
  struct Case {
    std::string target;
    int status;
    std::string reason;  // as the state got it, when 200
  };
  const std::string longest(kMaxReasonBytes, 'x');
  const std::vector<Case> cases = {
      {"/hold?for=30m&reason=restore%20DECL%20from%20backup", 200, "restore DECL from backup"},
      {"/hold?reason=restore+DECL&for=30m", 200, "restore DECL"},
      {"/hold?for=30m&reason=caf%C3%A9%20%E2%80%94%20ok", 200, "caf\u00e9 \u2014 ok"},
      {"/hold?for=30m&reason=" + longest, 200, longest},
      {"/hold?for=30m&reason=", 200, ""},
      {"/hold?for=30m&reason=" + longest + "x", 400, ""},
      {"/hold?for=30m&reason=line%0Abreak", 400, ""},  // would forge a log line
      {"/hold?for=30m&reason=tab%09", 400, ""},
      {"/hold?for=30m&reason=%C2%85", 400, ""},     // C1 control (NEL)
      {"/hold?for=30m&reason=%FF", 400, ""},        // not UTF-8
      {"/hold?for=30m&reason=%C0%AF", 400, ""},     // overlong
      {"/hold?for=30m&reason=%ED%A0%80", 400, ""},  // a surrogate
      {"/hold?for=30m&reason=%E2%80", 400, ""},     // cut short
      {"/hold?for=30m&reason=50%", 400, ""},        // bad escapes
      {"/hold?for=30m&reason=%4", 400, ""},
      {"/hold?for=30m&reason=%zz", 400, ""},
      {"/hold?for=30m&reason=a&reason=b", 400, ""},
      {"/hold?for=30m&reason=a&by=me", 400, ""},  // who it is, the caller does not say
  };
  for (const Case& c : cases) {
    INFO(c.target);
    FakeState state;
    HttpReply reply = HandleRequest(state, Post(c.target));
    CHECK(reply.status == c.status);
    CHECK(state.held_ == (c.status == 200 ? 1 : 0));
    if (c.status == 200) {
      CHECK(state.hold_request_.reason == c.reason);
      CHECK(state.hold_request_.by == kPeer);
    }
  }
}

// The one check the endpoint and the CLI share (cmd_daemon.cc refuses before sending).
TEST_CASE("HoldReasonProblem: bounded UTF-8 text without control characters", "[http]") {
  CHECK(HoldReasonProblem("").empty());
  CHECK(HoldReasonProblem("caf\u00e9 \u2014 restore DECL").empty());
  CHECK(HoldReasonProblem(std::string(kMaxReasonBytes, 'x')).empty());
  CHECK(HoldReasonProblem(std::string(kMaxReasonBytes + 1, 'x')) == "at most 200 bytes");
  for (const char* bad : {"a\nb", "tab\t", "del\x7f", "nel\xc2\x85", "\xff", "\xc0\xaf",
                          "\xed\xa0\x80", "\xe2\x80"}) {
    INFO(bad);
    CHECK(HoldReasonProblem(bad) == "UTF-8 text without control characters");
  }
}

TEST_CASE("POST /release ends the hold", "[http]") {
  FakeState state;
  HttpReply reply = HandleRequest(state, Post("/release"));
  CHECK(reply.status == 200);
  CHECK(reply.body ==
        "{\"schema\":\"mesh-reconciler/release/v1\",\"held\":false,\"was_held\":true}\n");
  CHECK(state.released_ == 1);
  CHECK(state.release_request_.by == kPeer);
  CHECK(HandleRequest(state, Post("/release?x=1")).status == 400);
  CHECK(HandleRequest(state, Post("/release?reason=done%0A")).status == 400);
  CHECK(state.released_ == 1);
  CHECK(HandleRequest(state, Post("/release?reason=maintenance%20over")).status == 200);
  CHECK(state.release_request_.reason == "maintenance over");
}

TEST_CASE("GET /drift names the hold in force before the report", "[http]") {
  FakeState state;
  state.report_ = std::make_shared<const std::string>("{\"pass_id\":7,\"converged\":true}\n");
  HttpReply free = HandleRequest(state, Get("/drift"));
  CHECK(free.status == 200);
  CHECK(free.body == "{\"hold\":{\"held\":false},\"pass_id\":7,\"converged\":true}\n");

  state.hold_state_ = HoldState{};
  state.hold_state_.held = true;
  state.hold_state_.until_unix_ms = 1764413730123;
  state.hold_state_.reason = "restore \"DECL\"";
  state.hold_state_.by = "127.0.0.1:5000";
  HttpReply held = HandleRequest(state, Get("/drift"));
  CHECK(held.body ==
        "{\"hold\":{\"held\":true,\"until\":\"2025-11-29T10:55:30.123Z\","
        "\"until_unix_ms\":1764413730123,\"reason\":\"restore \\\"DECL\\\"\","
        "\"by\":\"127.0.0.1:5000\",\"scope\":\"pod\"},\"pass_id\":7,\"converged\":true}\n");

  // After the document's own schema, which stays first.
  state.report_ = std::make_shared<const std::string>(
      "{\n  \"schema\": \"mesh-reconciler/drift/v1\",\n  \"pass_id\": 7\n}\n");
  state.hold_state_ = {};
  CHECK(HandleRequest(state, Get("/drift")).body ==
        "{\n  \"schema\": \"mesh-reconciler/drift/v1\",\"hold\":{\"held\":false},\n  \"pass_id\": "
        "7\n}\n");

  state.report_ = std::make_shared<const std::string>("{}");
  state.hold_state_ = {};
  CHECK(HandleRequest(state, Get("/drift")).body == "{\"hold\":{\"held\":false}}");
}

}  // namespace
}  // namespace mesh::reconciler::test
