#include "reconciler/pass/hash_job.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

using Clock = std::chrono::steady_clock;

// The calling thread's nice value set to kHashingNice; false (nothing changed) if refused.
bool LowerThisThreadsPriority() {
  return setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), kHashingNice) == 0;
}

}  // namespace

void StartHashThread(HashJob& job, HashingPause& passes, BackgroundHashing hooks, uint64_t pass_id,
                     model::UsersScope scope) {
  HashJob* j = &job;
  HashingPause* pause = &passes;  // joined by StopHashJob before the pause goes
  const int64_t total = job.pending.load();
  job.thread = std::thread([j, pause, hooks = std::move(hooks), pass_id, total, scope] {
    if (!LowerThisThreadsPriority()) {
      Log(LogLevel::kWarn, pass_id, "hashing at normal priority: setpriority refused",
          {{"error", std::strerror(errno)}});
    }
    const auto started = Clock::now();
    size_t logged_tenth = 0;
    // Called after each password (by one hashing thread at a time; the others wait for it).
    auto progress = [&](size_t done, size_t all) {
      pause->WaitWhileHeld(j->cancelled);
      j->pending.store(static_cast<int64_t>(all - done));
      if (hooks.progress) hooks.progress(static_cast<int64_t>(all - done));
      const size_t tenth = done * 10 / all;
      if (tenth > logged_tenth) {
        logged_tenth = tenth;
        Log(LogLevel::kInfo, pass_id, "hashing passwords", {{"done", done}, {"total", all}});
      }
      return !j->cancelled.load();
    };
    j->result = model::RenderUsersFileCached(j->desired, *j->hasher, scope, progress);
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f",
                  std::chrono::duration<double>(Clock::now() - started).count());
    Log(j->result->ok() ? LogLevel::kInfo : LogLevel::kWarn, pass_id, "hashing finished",
        {{"hashed", total},
         {"seconds", seconds},
         {"error", j->result->ok() ? "" : j->result->status().ToString()}});
    j->pending.store(0);
    if (hooks.progress) hooks.progress(0);
    j->finished.store(true);
    if (!j->cancelled.load() && hooks.ready) hooks.ready();
  });
}

void StopHashJob(std::unique_ptr<HashJob>& job, HashingPause& passes) {
  if (!job) return;
  job->cancelled.store(true);
  passes.Wake();
  if (job->thread.joinable()) job->thread.join();
  job.reset();
}

HashingStop StopHashJobWithin(std::unique_ptr<HashJob>& job, HashingPause& passes,
                              std::chrono::milliseconds wait) {
  if (!job) return HashingStop::kStopped;
  job->cancelled.store(true);
  passes.Wake();
  // Each hashing thread stops after the password under way; `finished` follows the last.
  const Clock::time_point deadline = Clock::now() + wait;
  while (!job->finished.load() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!job->finished.load()) return HashingStop::kStillRunning;
  StopHashJob(job, passes);
  return HashingStop::kStopped;
}

}  // namespace mesh::reconciler
