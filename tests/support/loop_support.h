// A scripted PassRunner for the loop's tests: records every call, can hold a pass open until
// the test lets it finish (a gate), and returns what the test's script says.
//
// Header-only (the test glob compiles only *_test.cc). Thread-safety: RunPass runs on the
// loop's thread; every other method on the test's thread; all state is under one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "reconciler/daemon/loop.h"

namespace mesh::reconciler::test {

struct PassCall {
  uint64_t pass_id = 0;
  Trigger trigger = Trigger::kOnce;
  ApplyMode mode = ApplyMode::kApply;
  std::chrono::steady_clock::time_point started;
  std::set<StreamName> named;
};

class ScriptedRunner : public PassRunner {
 public:
  // The report of each pass; the default is an ok, converged pass with valid records.
  using Script = std::function<PassReport(const PassCall&)>;

  PassReport RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                     const std::set<StreamName>& named) override {
    PassCall call{pass_id, trigger, mode, std::chrono::steady_clock::now(), named};
    Script script;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      calls_.push_back(call);
      in_pass_ = true;
      changed_.notify_all();
      changed_.wait(lock, [&] { return gate_open_; });
      in_pass_ = false;
      script = script_;
    }
    if (script) return script(call);
    return OkReport(call);
  }
  bool bus_connected() const override { return bus_connected_; }
  std::optional<int64_t> bus_certificate_expiry() const override { return std::nullopt; }

  static PassReport OkReport(const PassCall& call) {
    PassReport report;
    report.pass_id = call.pass_id;
    report.trigger = call.trigger;
    report.mode = call.mode;
    report.records_valid = true;
    report.duration_seconds = 0.001;
    // As Reconciler::RunPass: an applying pass observes and plans the named streams first.
    if (call.mode == ApplyMode::kApply)
      report.repaired_first.assign(call.named.begin(), call.named.end());
    return report;
  }

  void SetScript(Script script) {
    std::lock_guard<std::mutex> lock(mutex_);
    script_ = std::move(script);
  }
  void SetBusConnected(bool connected) { bus_connected_ = connected; }
  // Closed: a pass that starts waits inside RunPass until Open().
  void Close() {
    std::lock_guard<std::mutex> lock(mutex_);
    gate_open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    gate_open_ = true;
    changed_.notify_all();
  }
  // Waits until the pass with this id is inside RunPass (the gate being closed).
  bool WaitInPass(uint64_t pass_id, std::chrono::milliseconds deadline = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, deadline, [&] {
      return in_pass_ && !calls_.empty() && calls_.back().pass_id == pass_id;
    });
  }
  std::vector<PassCall> calls() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<PassCall> calls_;
  bool gate_open_ = true;
  bool in_pass_ = false;
  Script script_;
  std::atomic<bool> bus_connected_{true};
};

// Options for fast tests: no periodic pass unless asked, short backoff, no forced floor.
inline LoopOptions QuietOptions() {
  LoopOptions options;
  options.interval = std::chrono::hours(1);
  options.backoff_initial = std::chrono::milliseconds(20);
  options.backoff_cap = std::chrono::milliseconds(200);
  options.heartbeat = std::chrono::milliseconds(50);
  options.forced_floor = std::chrono::milliseconds(0);  // the floor's own tests set it
  options.seed = 42;
  return options;
}

}  // namespace mesh::reconciler::test
