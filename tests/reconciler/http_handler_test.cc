// HandleRequest on its own, table-driven: every endpoint, methods, tokens, bad paths, holds.
#include "reconciler/http_handler.h"

#include <catch2/catch.hpp>

#include "tests/support/http_fakes.h"

namespace mesh::reconciler::test {
namespace {

constexpr const char* kToken = mesh::testing::kFakeAdminToken;
using FakeState = mesh::testing::FakeHttpState;

HttpRequest Get(std::string target) {
  return {"GET", std::move(target), "", ""};
}
HttpRequest Post(std::string target, std::string authorization = std::string("Bearer ") + kToken) {
  return {"POST", std::move(target), std::move(authorization), ""};
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
  CHECK(metrics.body == "mesh_bus_connected 1\n");
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
  CHECK(drift.body == "{\"pass_id\":3}");
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
      {Post("/metrics"), 405, "GET"},
      {Get("/reconcile"), 405, "POST"},
      {Get("/hold?for=1m"), 405, "POST"},
      {{"PUT", "/release", "", ""}, 405, "POST"},
      {{"DELETE", "/drift", "", ""}, 405, "GET"},
      {{"HEAD", "/healthz", "", ""}, 405, "GET"},
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
        "{\"held\":true,\"until\":\"2025-11-29T10:55:30.123Z\",\"until_unix_ms\":1764413730123}\n");
}

TEST_CASE("POST /release ends the hold", "[http]") {
  FakeState state;
  HttpReply reply = HandleRequest(state, Post("/release"));
  CHECK(reply.status == 200);
  CHECK(reply.body == "{\"held\":false,\"was_held\":true}\n");
  CHECK(state.released_ == 1);
  CHECK(HandleRequest(state, Post("/release?x=1")).status == 400);
}

}  // namespace
}  // namespace mesh::reconciler::test
