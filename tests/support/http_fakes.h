// Test support: a fake daemon behind the pure HTTP handler (reconciler/http/http_handler.h), with
// canned answers and a record of what was asked of it. Used by the handler's tests, the HTTPS
// listener's tests and the HTTP fuzz target (which links no Catch: keep this header free of it).
//
// Header-only. Thread-safety: the counters are atomics, so that a listener's I/O threads may
// call the fake; the canned answers are set before use.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "model/digest.h"
#include "reconciler/http/http_handler.h"

namespace mesh::testing {

inline constexpr char kFakeAdminToken[] = "s3cret-token-for-tests";

class FakeHttpState : public reconciler::HttpState {
 public:
  std::string MetricsText() const override { return "mesh_reconciler_bus_connected 1\n"; }
  reconciler::Health health() const override { return health_; }
  reconciler::Readiness readiness() const override { return readiness_; }
  std::shared_ptr<const std::string> LastReportJson() const override { return report_; }
  std::optional<std::string> TokenDigest() const override { return digest_; }
  Result<std::string> ForcePass() const override {
    ++forced_;
    return force_result_;
  }
  Result<reconciler::HoldState> Hold(std::chrono::milliseconds duration,
                                     const reconciler::HoldRequest& request,
                                     reconciler::HoldScope scope) const override {
    held_for_ = duration;
    hold_request_ = request;
    hold_scope_ = scope;
    ++held_;
    reconciler::HoldState state;
    state.held = true;
    state.until_unix_ms = 1764413730123;
    state.reason = request.reason;
    state.by = request.by;
    state.scope = scope;
    return state;
  }
  reconciler::HoldScope DefaultHoldScope() const override { return default_scope_; }
  bool Release(const reconciler::HoldRequest& request) const override {
    release_request_ = request;
    ++released_;
    return true;
  }
  reconciler::HoldState hold_state() const override { return hold_state_; }

  reconciler::Health health_{true, "alive"};
  reconciler::Readiness readiness_{true, "ready"};
  std::shared_ptr<const std::string> report_;
  std::optional<std::string> digest_ = model::Sha256(kFakeAdminToken);
  Result<std::string> force_result_ = std::string("{\"pass_id\":9}");
  mutable std::atomic<int> forced_ = 0;
  mutable std::atomic<int> held_ = 0;
  mutable std::atomic<int> released_ = 0;
  reconciler::HoldState hold_state_;
  mutable std::optional<std::chrono::milliseconds> held_for_;  // the last hold (one thread)
  mutable reconciler::HoldRequest hold_request_;               // the last hold's (one thread)
  mutable reconciler::HoldRequest release_request_;            // the last release's
  mutable reconciler::HoldScope hold_scope_ = reconciler::HoldScope::kPod;  // the last hold's
  reconciler::HoldScope default_scope_ = reconciler::HoldScope::kPod;
};

}  // namespace mesh::testing
