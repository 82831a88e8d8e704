// The loop's schedule and limits (reconciler/daemon/loop.h says what each does to a pass).
//
// Thread-safety: a plain value.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "reconciler/http/daemon_view.h"

namespace mesh::reconciler {

struct LoopOptions {
  std::chrono::milliseconds interval{30000};
  double interval_jitter = 0.10;  // +-10%
  std::chrono::milliseconds backoff_initial{1000};
  std::chrono::milliseconds backoff_cap{60000};  // and never more than `interval`
  // A pass that found the server not ready (starting, recovering, no meta leader) is a wait,
  // not a failure: the next one follows after this (never more than `interval`), and the
  // backoff does not grow.
  std::chrono::milliseconds not_ready_wait{250};
  // The loop beats at least this often while idle; /healthz fails when the last beat is older
  // than `stale_after` (which must cover the longest pass).
  std::chrono::milliseconds heartbeat{1000};
  std::chrono::milliseconds stale_after{120000};
  std::chrono::milliseconds max_hold = kMaxHold;
  // Forced requests waiting at once (RequestPass and RequestPassAsync); more are refused with
  // kUnavailable. A waiter holds no thread; the daemon sets this below the HTTP listener's
  // connection cap, so that waiting POSTs always leave room for probes.
  size_t max_waiting_requests = 1024;
  // The least time between the starts of two passes woken by forced requests alone (POST
  // /reconcile, a release): requests that arrive meanwhile share the pass at the floor. The
  // first forced pass after a quiet floor starts at once. Other triggers are not delayed.
  std::chrono::milliseconds forced_floor{1000};
  // A forced pass after the first of a burst waits, past its floor, until forced requests
  // have stopped arriving for this long, and at most forced_max_wait past its floor: the
  // second pass serves the whole burst even when reading it takes the daemon longer than the
  // floor (1,000 requests took ThreadSanitizer's build on a loaded machine 2.8 s).
  std::chrono::milliseconds forced_quiet{250};
  std::chrono::milliseconds forced_max_wait{5000};
  uint64_t seed = 0;  // jitter seed; 0: from std::random_device
  // The least time between the starts of two advisory-woken passes (--advisory-floor): a storm
  // of advisories about owned objects costs at most one pass per floor. Other triggers are
  // never delayed by it.
  std::chrono::milliseconds advisory_floor{100};
  // With a lease: a lease round this often while no pass runs (0: none). A round that makes
  // this instance the holder wakes a pass at once (Trigger::kLeaseAcquired).
  std::chrono::milliseconds lease_round{0};
  // With a lease: while passes fail before planning, how long after the last one that planned
  // this instance still renews (ParticipationFor); after that it releases the lease and acquires
  // none until a pass plans again. When the loop stops, the lease is released.
  std::chrono::milliseconds lease_grace{1000};
};

}  // namespace mesh::reconciler
