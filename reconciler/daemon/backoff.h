// After a pass, the runner's rule: what the pass's result was (a success, a failure that grows
// the backoff, or a wait for the server that does not), and how long the retry after failures
// waits. Pure; the loop (loop.h) adds the jitter and keeps the count.
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <set>

#include "model/enum_names.h"
#include "reconciler/daemon/loop_options.h"
#include "reconciler/pass/report.h"

namespace mesh::reconciler {

// kWaiting: the server was not ready (PassReport::readiness), a wait rather than a failure.
enum class PassResult { kSuccess, kFailure, kWaiting };
inline constexpr EnumNames<PassResult, 3> kPassResultNames{{{
    {PassResult::kSuccess, "success"},
    {PassResult::kFailure, "failure"},
    {PassResult::kWaiting, "waiting"},
}}};
static_assert(kPassResultNames.Dense());
const char* ToString(PassResult v);  // "success", "failure", "waiting"

// Ok status and no failed action. Remaining drift that cannot be repaired is not a failure.
// Waiting: the server is not ready, or some desired objects were not described by their
// leaders (PlanResult::undescribed); the runner then retries soon, without a growing backoff.
PassResult PassSucceeded(const PassReport& report);

// The delay before the retry that follows `consecutive_failures` (>= 1) failed passes, before
// jitter: backoff_initial * 2^(n-1), at most min(backoff_cap, interval).
std::chrono::milliseconds BackoffBase(int consecutive_failures, const LoopOptions& options);
// min(backoff_cap, interval): no retry waits longer than the interval.
std::chrono::milliseconds BackoffCap(const LoopOptions& options);

// After a repair of named streams (Trigger::kRepair): whether the full pass an advisory asks
// for must still follow. kNone when the repair settled every named stream: it observed and
// planned them (PassReport::repaired_first), nothing of them remains and no action failed.
// Anything else (not observed, not this instance's to act on under a lease, contested, waiting
// for a store's removal, a failed action) is left to the full pass.
enum class RepairFollowUp { kNone, kFullPass };
RepairFollowUp FollowUpOf(const PassReport& repair, const std::set<StreamName>& named);

}  // namespace mesh::reconciler
