// The daemon's background hashing of new and changed passwords, and the pause a pass holds on it
// while a pass applies streams and consumers.
//
// Thread-safety: HashingPause is safe from any thread. A HashJob is started, collected and stopped
// by the pass's thread only; while it runs, its hashing threads write `result`, `pending` and
// `finished` (atomics, and `result` before `finished`) and read `cancelled`; `desired` and
// `hasher` are the job's until `finished` (or until StopHashJob has joined it).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "model/desired.h"
#include "model/records.h"
#include "model/result.h"
#include "model/thread_safety.h"
#include "model/users_file.h"
#include "reconciler/pass/pass.h"

namespace mesh::reconciler {

// Background hashing runs at the lowest CPU priority: the repairs, the probes and the metrics
// the daemon serves meanwhile come first, and so does a server sharing the cores. Unused CPU
// still goes to hashing, so on an idle machine it takes no longer. Linux keeps the nice value
// per thread and a new thread inherits it, so HashAll's helpers run at it too.
inline constexpr int kHashingNice = 19;

// Background hashing waits while a pass changes streams and consumers. Its threads run at
// kHashingNice, but a nice value only weighs against threads of the same cgroup, and on 2 cores
// even nice 19 hashing slowed the creations of an empty-store restore (restart_bench: 3.6 s
// instead of 2.8 s until every stream and consumer was back); in a pod nats-server is another
// container, where nice counts for nothing. So a pass holds this pause while it applies
// JetStream actions (ChangesJetStream), and a hashing thread that has finished its current
// password waits until no pass holds it (or the job is cancelled). Not for the whole pass: a
// client forcing passes back to back while it polls for convergence kept the hashing waiting
// (in one loaded run, 4 passwords at cost 12 took 14.5 s while 454 such passes ran, and a
// daemon test timed out), and a pass that changes nothing has no creations to protect.
class HashingPause {
 public:
  void Hold() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    ++holders_;
  }
  void Release() EXCLUDES(mutex_) {
    {
      MutexLock lock(mutex_);
      --holders_;
    }
    changed_.notify_all();
  }
  // After a job's `cancelled` is set: taking the mutex first, a waiter is either before its
  // check (and sees it) or already waiting (and is woken).
  void Wake() EXCLUDES(mutex_) {
    { MutexLock lock(mutex_); }
    changed_.notify_all();
  }
  void WaitWhileHeld(const std::atomic<bool>& cancelled) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    ++waiting_;
    changed_.wait(lock.native(),
                  [&]() REQUIRES(mutex_) { return holders_ == 0 || cancelled.load(); });
    --waiting_;
  }
  // Threads in WaitWhileHeld now (held back, or about to find it released).
  int waiting() const EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return waiting_;
  }

 private:
  mutable Mutex mutex_;
  std::condition_variable changed_;
  int holders_ GUARDED_BY(mutex_) = 0;
  int waiting_ GUARDED_BY(mutex_) = 0;
};

// A hold on the pause for a scope (an apply).
class HashingPauseHold {
 public:
  explicit HashingPauseHold(HashingPause& pause) : pause_(pause) { pause_.Hold(); }
  ~HashingPauseHold() { pause_.Release(); }
  HashingPauseHold(const HashingPauseHold&) = delete;
  HashingPauseHold& operator=(const HashingPauseHold&) = delete;

 private:
  HashingPause& pause_;
};

// The hashing of new and changed passwords on its own threads (the daemon). The job owns the
// hasher while it runs; the pass takes it back, with the rendering, once `finished` is set.
struct HashJob {
  uint64_t from = 0;            // the generation of the records `desired` was derived from
  model::DesiredState desired;  // what it renders
  std::unique_ptr<model::BcryptHasher> hasher;
  std::optional<Result<model::RenderedUsersFile>> result;  // written before `finished`
  std::atomic<bool> finished{false};
  std::atomic<bool> cancelled{false};
  std::atomic<int64_t> pending{0};
  std::thread thread;
};

// Starts `job`'s thread: it renders `job.desired` with `job.hasher` at kHashingNice, waiting on
// `passes` after each password, and calls `hooks` (progress after each password, ready at the
// end unless cancelled). `job.pending` must hold the passwords to hash. `passes` must outlive
// the thread (StopHashJob joins it).
void StartHashThread(HashJob& job, HashingPause& passes, BackgroundHashing hooks, uint64_t pass_id,
                     model::UsersScope scope);

// Cancels the job, wakes its threads and joins it; `job` is then empty. Nothing when empty.
void StopHashJob(std::unique_ptr<HashJob>& job, HashingPause& passes);

// Cancels the job and waits up to `wait` for the hashes under way: kStillRunning leaves `job`
// as it is (its threads still hash), kStopped has joined and emptied it.
HashingStop StopHashJobWithin(std::unique_ptr<HashJob>& job, HashingPause& passes,
                              std::chrono::milliseconds wait);

}  // namespace mesh::reconciler
