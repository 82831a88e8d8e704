// The lease: when several reconcilers watch one JetStream cluster (one per nats-server pod, each
// keeping its own server's users file), only one at a time acts on the JetStream objects.
//
// The lease is one key ("holder") in a JetStream KV bucket ("mesh_reconciler_lease": history 1,
// max age = the lease's time to live, replicas = min(3, cluster size), raised when an instance
// counts more members than it was made with), changed only by
// compare-and-set:
//   acquire  create-if-absent (Nats-Expected-Last-Subject-Sequence: 0) with our identity;
//   renew    update with the revision we last wrote (the same header with that revision);
//   release  update with an empty holder (SIGTERM, or a holder stepping down): the next round
//            of any instance treats that entry as free and updates it with its identity;
//   expiry   the bucket's max age: a holder that stops renewing (it died, or lost the bus) has
//            its entry aged out by the server, and the next round of another instance creates
//            it again. No clock is compared across machines.
// Only a write that succeeded makes an instance the holder (a read may come from a lagging
// replica); it may then act until `valid_until` = the start of that round + 3/4 of the time to
// live, measured on its own steady clock. A write to the bus may take up to the request timeout
// to be answered (or to time out while the server still carries it out), so the holder starts
// one only when it would end before `valid_until` (AccessForWrite), and the time to live is at
// least four request timeouts: a write started under the lease ends before any other instance
// can hold it. Every pass runs one round, and between passes every instance runs one each
// quarter interval (LeaseRoundFor): the holder renews every quarter interval, long before its
// entry (time to live 1.5 intervals, or four request timeouts when longer) could age out; a
// standby finds the key free at most a quarter interval after a dead holder's entry aged out,
// and its pass follows at once. A holder that dies is thus replaced within 1.75 intervals (with
// the default 30 s interval and 5 s request timeout; within four request timeouts and a quarter
// interval when the interval is shorter than about 13 s).
//
// Deliberate extension of the contract (section 4): with the lease on, the reconciler's own user
// also needs publish "$KV.mesh_reconciler_lease.holder" (LeasePublishAllow), the one subject its
// KV writes go to; its reads and the bucket's creation go through "$JS.API.>" as before.
//
// Pure: the decisions read no clock (`now` is passed in) and do I/O only through the
// LeaseStore they are given. Thread-safety: a Lease is used by one thread (the reconcile thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/enum_names.h"
#include "model/result.h"
#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

inline constexpr char kLeaseBucket[] = "mesh_reconciler_lease";
inline constexpr char kLeaseKey[] = "holder";

// "$KV.mesh_reconciler_lease.holder": the subject the lease's writes are published to.
std::string LeaseSubject();
// The subjects the reconciler's own user must also be allowed to publish when the lease is on.
std::vector<std::string> LeasePublishAllow();

// The time to live for a pass interval and the bus's request timeout: 1.5 intervals (six lease
// rounds, so a slow pass or a slow round still renews in time), and at least four request
// timeouts (a renewal and the write after it both fit in the 3/4 of it a holder may act:
// AccessForWrite), and at least one second.
std::chrono::milliseconds LeaseTtlFor(std::chrono::milliseconds interval,
                                      std::chrono::milliseconds request_timeout);
// How often an instance runs a lease round between passes: a quarter interval, at least 250 ms.
// LeaseTtlFor(i, t) + LeaseRoundFor(i) <= 2 i when 4 t <= 1.5 i: a dead holder is then replaced
// within two intervals.
std::chrono::milliseconds LeaseRoundFor(std::chrono::milliseconds interval);

// What a lease round between passes changed: this instance became the holder, or the bus hold
// it saw in force ended (released, or its time passed): both owe a pass at once.
enum class LeaseChange { kNone, kAcquired, kHoldEnded };

enum class LeaseRole {
  kOff,      // no lease configured: this reconciler acts alone
  kHolder,   // holds the lease: acts on JetStream objects (until valid_until)
  kStandby,  // another instance holds it: acts only on its own users file
  kUnknown,  // the lease could not be read or written this round: acts only on the users file
};
inline constexpr EnumNames<LeaseRole, 4> kLeaseRoleNames{{{
    {LeaseRole::kOff, "off"},
    {LeaseRole::kHolder, "holder"},
    {LeaseRole::kStandby, "standby"},
    {LeaseRole::kUnknown, "unknown"},
}}};
static_assert(kLeaseRoleNames.Dense());
const char* ToString(LeaseRole v);  // "off", "holder", "standby", "unknown"

// The key's current entry.
struct LeaseEntry {
  std::string holder;  // the identity written by the holder
  uint64_t revision = 0;
};

// The key the lease lives in. Implemented over JetStream KV (reconciler/apply/kv_lease_store.h) and
// by test fakes. Errors: Errc::kRefused when a compare-and-set does not match (an entry exists /
// the revision moved on); transport errors otherwise.
class LeaseStore {
 public:
  virtual ~LeaseStore() = default;
  // Writes `holder` when the key has no entry; the new revision.
  virtual Result<uint64_t> Create(const std::string& holder) = 0;
  // Writes `holder` when the key's last revision is still `last_revision`; the new revision.
  virtual Result<uint64_t> Update(const std::string& holder, uint64_t last_revision) = 0;
  // The entry, or nullopt when the key has none (never written, or aged out).
  virtual Result<std::optional<LeaseEntry>> Get() = 0;
  // How long an entry lives without renewal: the bucket's max age as the server holds it.
  virtual std::chrono::milliseconds ttl() const = 0;
};

using LeaseClock = std::chrono::steady_clock;

// The renewal policy. An instance takes part in the lease (renews it, or acquires it when free)
// only while it can act: its last pass got past observation (it planned), or the last one that
// did is at most a grace ago (LeaseGraceFor: a passing fault does not move the lease). Otherwise
// it steps down: a holder releases the lease (a standby takes it at its next round) and nobody
// acquires it. A holder whose passes all fail (its monitoring endpoint unreachable, its server
// not ready) thus no longer keeps the standbys out.
enum class LeaseParticipation { kTakePart, kStepDown };
enum class LastPass { kPlanned, kStoppedBeforePlan };
// `last_planned`: when a pass of this instance last got past observation (nullopt: never).
LeaseParticipation ParticipationFor(LastPass last_pass,
                                    std::optional<LeaseClock::time_point> last_planned,
                                    LeaseClock::time_point now, std::chrono::milliseconds grace);
// Half an interval, at least one second: a holder whose passes stopped planning steps down at
// its first lease round after that, well before its entry would age out (1.5 intervals).
std::chrono::milliseconds LeaseGraceFor(std::chrono::milliseconds interval);

struct LeaseState {
  LeaseRole role = LeaseRole::kOff;
  std::string holder;                    // as last seen; this instance's identity when kHolder
  uint64_t revision = 0;                 // the entry's revision as last seen
  LeaseClock::time_point valid_until{};  // kHolder: act only before this
  std::string error;                     // kUnknown: why (no secret)
};

// `holder` may act at `now`.
bool MayAct(const LeaseState& state, LeaseClock::time_point now);

class Lease {
 public:
  // `identity` must be unique among the instances (see LeaseIdentity).
  explicit Lease(std::string identity);

  // One round, at `now` (taken before the first write): renew when this instance believes it
  // holds the lease, else acquire when the key is free, else learn who holds it. At most two
  // writes and two reads.
  LeaseState TryAcquireOrRenew(LeaseStore& store, LeaseClock::time_point now);

  // The lease could not even be asked this round (e.g. the bucket could not be opened): act on
  // nothing but the users file. A later round renews from the revision last written.
  LeaseState Unreachable(std::string error);

  // Gives the lease up (SIGTERM, or stepping down): when this instance holds it, or may still
  // (its last round got no answer), overwrites its entry with an empty holder (compare-and-set
  // on the revision it last wrote), which every other instance's next round treats as free.
  // Afterwards this instance is a standby until a round acquires it again. Never written an
  // entry, or a standby: nothing is written (Ok).
  Status Release(LeaseStore& store);

  bool MayAct(LeaseClock::time_point now) const { return reconciler::MayAct(state_, now); }
  // This instance wrote the entry last, as far as it knows (a holder, or unsure after a round
  // without an answer): Release has something to give up.
  bool MayHold() const { return own_revision_ != 0; }
  const LeaseState& state() const { return state_; }
  const std::string& identity() const { return identity_; }

 private:
  LeaseState Holding(uint64_t revision, std::chrono::milliseconds ttl, LeaseClock::time_point now);

  std::string identity_;
  LeaseState state_;
  // The revision of this instance's own entry as last seen (0: none), to renew with.
  uint64_t own_revision_ = 0;
};

// "<host>-<8 hex digits>": the host (pod) name, sanitised to [A-Za-z0-9._-] and at most 63
// characters ("reconciler" when empty), and a random suffix so that a restarted pod with the
// same name is a new holder.
std::string LeaseIdentity(std::string_view host, uint32_t random);

// Whether a pass may act on JetStream objects.
enum class JetStreamAccess { kAct, kUsersFileOnly };
JetStreamAccess AccessFor(const LeaseState& state, LeaseClock::time_point now);
// Whether a write to JetStream may start at `now`: it is answered, or times out, within
// `longest_write` (the request timeout), and must end while this instance still holds the
// lease, since the server may carry out a write whose answer never came. Without a lease
// (kOff), always.
JetStreamAccess AccessForWrite(const LeaseState& state, LeaseClock::time_point now,
                               std::chrono::milliseconds longest_write);

// The actions a pass may apply under `access`: all of them, or only the users-file actions (a
// standby keeps its own server's users file; the JetStream objects are the holder's).
std::vector<Action> ActionsAllowed(std::vector<Action> actions, JetStreamAccess access);

}  // namespace mesh::reconciler
