// One reconcile pass, level-triggered and idempotent: re-read the records, re-observe
// everything (JetStream, users file, monitoring endpoint), plan, and (unless observing only)
// apply, then re-observe to report what remains. Retries, backoff and scheduling are the
// runner's (reconciler/daemon/loop.h), never the pass's.
//
// Ownership: Reconciler owns its bus connection (connected lazily, kept across passes) and the
// bcrypt cache. Thread-safety: RunPass is called from one thread (the reconcile thread); the
// EventSink given at construction is invoked on cnats' threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/names.h"
#include "model/records.h"
#include "model/result.h"
#include "observers/bus.h"
#include "reconciler/apply/apply.h"
#include "reconciler/pass/pass_io.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/pass/report.h"
#include "reconciler/plan/advisory_filter.h"
#include "reconciler/plan/bus_hold.h"
#include "reconciler/plan/contest.h"
#include "reconciler/plan/lease.h"
#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

// The reconciler's own principal as a pass derives it: its user (--user), its password as a
// plain credential when it has one (none otherwise), and with --lease the lease's KV subject
// to publish to.
model::ReconcilerIdentity OwnIdentity(const PassSettings& settings);

// Reconciler::StopHashing: the hashes under way ended within the wait, or are still running.
enum class HashingStop { kStopped, kStillRunning };

// The daemon's hashing on its own threads. Without it (the CLI), a pass hashes what it needs
// before it observes. Both hooks are called from the hashing thread and must not block.
struct BackgroundHashing {
  std::function<void()> ready;                    // the users file can now be rendered: wake
  std::function<void(int64_t pending)> progress;  // plain passwords still to hash (a gauge)
};

class Reconciler {
 public:
  // `io`: what the pass reads and opens; the live observer and OpenConnection unless a test
  // gives its own (pass_io.h).
  Reconciler(PassSettings settings, observers::EventSink events = nullptr,
             std::optional<BackgroundHashing> background = std::nullopt, PassIo io = {});
  ~Reconciler();

  // `named`: streams advisories named since the last pass (deleted, changed, or a consumer of
  // theirs deleted). When applying, the pass first observes, plans and repairs these alone (a
  // few requests), then the whole account as always; with Trigger::kRepair only these.
  PassReport RunPass(uint64_t pass_id, Trigger trigger, ApplyMode mode,
                     const std::set<StreamName>& named = {});

  // With --lease, between passes: one lease round on the connection the last pass used (none
  // when it is down). kAcquired when this round made this instance the holder. Called on the
  // reconcile thread only, like RunPass.
  LeaseChange RunLeaseRound();
  // With --lease: gives the lease up when this instance holds it (on SIGTERM, or when its
  // passes cannot act: ParticipationFor). Reconcile thread only.
  void ReleaseLease();
  // The lease as last seen (role kOff without --lease). Reconcile thread only.
  LeaseState lease_state() const;
  // With --lease: writes the bus hold (replacing one in force; `hold.through` is set to this
  // instance's lease identity) or deletes it, on the connection the last pass used. Reconcile
  // thread only; kUnavailable without a lease or a connection.
  Status WriteBusHold(BusHold hold);
  Status DeleteBusHold();
  // The bus hold as last read (at a lease round or before a pass acted). Reconcile thread only.
  BusHoldView bus_hold() const;

  bool bus_connected() const;
  // The expiry (Unix seconds) of the bus's TLS certificate, when known.
  std::optional<int64_t> bus_certificate_expiry() const;

  // Any thread: the reconciler's own password changed (its file was rotated). The next pass
  // renders it into the users file (re-using every other hash the file proves); connections
  // log in with it once the server has loaded that file, without a failed pass between.
  void RotatePassword(std::string password);

  // Cancels the background hashing (BackgroundHashing) and waits up to `wait` for the hashes
  // under way: bcrypt cannot be interrupted, and at a high cost on a saturated CPU one can take
  // minutes. kStillRunning: they are still running, on this object; it must then not be
  // destroyed (the caller exits the process instead). Only while no pass runs.
  HashingStop StopHashing(std::chrono::milliseconds wait);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::reconciler
