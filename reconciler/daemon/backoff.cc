#include "reconciler/daemon/backoff.h"

#include <algorithm>
#include <cstdint>

namespace mesh::reconciler {

const char* ToString(PassResult v) {
  return kPassResultNames.Name(v);
}

PassResult PassSucceeded(const PassReport& report) {
  if (report.readiness == ServerReadiness::kNotReady) return PassResult::kWaiting;
  if (!report.status.ok() || report.any_action_failed()) return PassResult::kFailure;
  // Objects whose leaders did not describe them (an election under way): a wait, like a
  // server that is not ready, not a failure that grows the backoff.
  return report.plan.undescribed > 0 ? PassResult::kWaiting : PassResult::kSuccess;
}

std::chrono::milliseconds BackoffCap(const LoopOptions& options) {
  return std::min(options.backoff_cap, options.interval);
}

std::chrono::milliseconds BackoffBase(int consecutive_failures, const LoopOptions& options) {
  const int doublings = std::clamp(consecutive_failures - 1, 0, 30);
  return std::min(options.backoff_initial * (int64_t{1} << doublings), BackoffCap(options));
}

RepairFollowUp FollowUpOf(const PassReport& repair, const std::set<StreamName>& named) {
  const std::set<StreamName> repaired(repair.repaired_first.begin(), repair.repaired_first.end());
  const bool settled =
      !named.empty() && repaired == named && repair.converged() && repair.plan.undescribed == 0;
  return settled ? RepairFollowUp::kNone : RepairFollowUp::kFullPass;
}

}  // namespace mesh::reconciler
