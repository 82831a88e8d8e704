#include "reconciler/plan/lease.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "reconciler/plan/bus_hold.h"

namespace mesh::reconciler {
namespace {

constexpr auto kMinimumTtl = std::chrono::milliseconds(1000);
constexpr auto kMinimumRound = std::chrono::milliseconds(250);
constexpr auto kMinimumGrace = std::chrono::milliseconds(1000);
constexpr size_t kMaxHostLength = 63;
// The attempts at a write in one round: the first, and one after reading the entry.
constexpr int kWriteAttempts = 2;

}  // namespace

std::string LeaseSubject() {
  return std::string("$KV.") + kLeaseBucket + "." + kLeaseKey;
}

std::vector<std::string> LeasePublishAllow() {
  return {LeaseSubject(), BusHoldSubject()};
}

std::chrono::milliseconds LeaseTtlFor(std::chrono::milliseconds interval,
                                      std::chrono::milliseconds request_timeout) {
  return std::max({interval * 3 / 2, request_timeout * 4, kMinimumTtl});
}

std::chrono::milliseconds LeaseRoundFor(std::chrono::milliseconds interval) {
  return std::max(interval / 4, kMinimumRound);
}

const char* ToString(LeaseRole v) {
  return kLeaseRoleNames.Name(v);
}

LeaseParticipation ParticipationFor(LastPass last_pass,
                                    std::optional<LeaseClock::time_point> last_planned,
                                    LeaseClock::time_point now, std::chrono::milliseconds grace) {
  if (last_pass == LastPass::kPlanned) return LeaseParticipation::kTakePart;
  return last_planned && now - *last_planned <= grace ? LeaseParticipation::kTakePart
                                                      : LeaseParticipation::kStepDown;
}

std::chrono::milliseconds LeaseGraceFor(std::chrono::milliseconds interval) {
  return std::max(interval / 2, kMinimumGrace);
}

bool MayAct(const LeaseState& state, LeaseClock::time_point now) {
  return state.role == LeaseRole::kOff ||
         (state.role == LeaseRole::kHolder && now < state.valid_until);
}

Lease::Lease(std::string identity) : identity_(std::move(identity)) {
  state_.role = LeaseRole::kUnknown;  // no round yet: act on nothing
}

LeaseState Lease::Holding(uint64_t revision, std::chrono::milliseconds ttl,
                          LeaseClock::time_point now) {
  own_revision_ = revision;
  LeaseState state;
  state.role = LeaseRole::kHolder;
  state.holder = identity_;
  state.revision = revision;
  // The server ages the entry out `ttl` after it stored it, which is after `now`: acting until
  // 3/4 of that leaves a margin for the pass that acts and for the clocks' rates.
  state.valid_until = now + ttl - ttl / 4;
  return state;
}

LeaseState Lease::TryAcquireOrRenew(LeaseStore& store, LeaseClock::time_point now) {
  std::string write_error;
  for (int attempt = 0; attempt < kWriteAttempts; ++attempt) {
    Result<uint64_t> written =
        own_revision_ != 0 ? store.Update(identity_, own_revision_) : store.Create(identity_);
    if (written.ok()) return state_ = Holding(*written, store.ttl(), now);
    write_error = written.status().ToString();

    // Refused (someone else holds it, or our entry aged out), or no answer (perhaps written
    // after all): read the entry to decide, never to hold.
    Result<std::optional<LeaseEntry>> entry = store.Get();
    if (!entry.ok()) return Unreachable(write_error + "; then " + entry.status().ToString());
    if (!entry->has_value()) {
      own_revision_ = 0;  // free (aged out): create it
      continue;
    }
    if ((*entry)->holder.empty()) {
      own_revision_ = (*entry)->revision;  // released by its holder: free, take it from there
      continue;
    }
    if ((*entry)->holder == identity_) {
      own_revision_ = (*entry)->revision;  // ours (an answer was lost): renew from there
      continue;
    }
    own_revision_ = 0;
    state_ = {};
    state_.role = LeaseRole::kStandby;
    state_.holder = (*entry)->holder;
    state_.revision = (*entry)->revision;
    return state_;
  }
  return Unreachable(write_error);
}

LeaseState Lease::Unreachable(std::string error) {
  state_ = {};
  state_.role = LeaseRole::kUnknown;
  state_.error = std::move(error);
  return state_;
}

Status Lease::Release(LeaseStore& store) {
  // Not only as a holder: after a round that got no answer (kUnknown) the entry may still name
  // this instance at the revision it last wrote. Releasing that revision is a compare-and-set,
  // so an entry that moved on meanwhile is refused, never overwritten.
  if (own_revision_ == 0) return Status::Ok();
  Result<uint64_t> written = store.Update("", own_revision_);
  own_revision_ = 0;
  state_ = {};
  state_.role = LeaseRole::kStandby;
  if (!written.ok()) {
    // Refused: the entry moved on (it aged out and another took it). No answer: perhaps
    // written. Either way this instance no longer acts; the entry ages out if nobody renews it.
    state_.role = LeaseRole::kUnknown;
    state_.error = written.status().ToString();
    return written.status();
  }
  state_.revision = *written;
  return Status::Ok();
}

std::string LeaseIdentity(std::string_view host, uint32_t random) {
  std::string name;
  for (char c : host.substr(0, kMaxHostLength)) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    name += plain ? c : '_';
  }
  if (name.empty()) name = "reconciler";
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "-%08x", random);
  return name + suffix;
}

JetStreamAccess AccessFor(const LeaseState& state, LeaseClock::time_point now) {
  return MayAct(state, now) ? JetStreamAccess::kAct : JetStreamAccess::kUsersFileOnly;
}

JetStreamAccess AccessForWrite(const LeaseState& state, LeaseClock::time_point now,
                               std::chrono::milliseconds longest_write) {
  return AccessFor(state, now + longest_write);
}

std::vector<Action> ActionsAllowed(std::vector<Action> actions, JetStreamAccess access) {
  if (access == JetStreamAccess::kAct) return actions;
  std::erase_if(actions, [](const Action& a) { return KindOf(a.kind) != ObjectKind::kUsersFile; });
  return actions;
}

}  // namespace mesh::reconciler
