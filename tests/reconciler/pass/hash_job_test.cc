// The daemon's background hashing (reconciler/pass/hash_job.h) and the pause a pass holds while
// it applies streams and consumers: no server, no timing. What the pause promises is shown with
// the pause held from the start: a hashing thread that finishes a password waits at the pause
// before it reports it, so nothing is reported and no thread starts another password until the
// pause is released (each thread finishes at most the one it had begun).
#include "reconciler/pass/hash_job.h"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tests/support/nats_server.h"
#include "tests/support/pass_fixtures.h"

namespace mesh::reconciler {
namespace {

using mesh::testing::WaitFor;

// A job over a generated mesh's passwords at bcrypt's smallest cost, not started.
std::unique_ptr<HashJob> JobForGeneratedMesh() {
  auto job = std::make_unique<HashJob>();
  job->desired =
      model::Derive(test::ParseOrFail(test::GeneratedRecordsJson(7, 24, 3, 2)), test::Identity());
  job->hasher = std::make_unique<model::BcryptHasher>(test::kReconcilerPassword, test::kCheapCost);
  job->pending = static_cast<int64_t>(job->hasher->Uncached(job->desired));
  return job;
}

int Cores() {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// What the hooks saw, from the hashing threads.
struct Seen {
  std::mutex mutex;
  std::vector<int64_t> pending;  // each progress call's argument
  bool ready = false;
  BackgroundHashing Hooks() {
    BackgroundHashing hooks;
    hooks.progress = [this](int64_t left) {
      std::lock_guard<std::mutex> lock(mutex);
      pending.push_back(left);
    };
    hooks.ready = [this] {
      std::lock_guard<std::mutex> lock(mutex);
      ready = true;
    };
    return hooks;
  }
  size_t calls() {
    std::lock_guard<std::mutex> lock(mutex);
    return pending.size();
  }
  bool is_ready() {
    std::lock_guard<std::mutex> lock(mutex);
    return ready;
  }
};

TEST_CASE("hashing held by a pass's pause reports nothing and begins no password until released",
          "[pass][hashing]") {
  std::unique_ptr<HashJob> job = JobForGeneratedMesh();
  const int64_t total = job->pending.load();
  REQUIRE(total > 2 * Cores());  // else every thread's one password could be all of them
  model::BcryptHasher* hasher = job->hasher.get();
  HashingPause pause;
  Seen seen;
  pause.Hold();  // a pass applying when the job starts
  StartHashThread(*job, pause, seen.Hooks(), 1, model::UsersScope::kServer);

  // A thread has finished a password and waits at the pause: the others, once done with theirs,
  // wait for it (HashAll reports one password at a time), so none begins another.
  REQUIRE(WaitFor([&] { return pause.waiting() == 1; }));
  CHECK(seen.calls() == 0);
  CHECK(job->pending.load() == total);
  CHECK(!job->finished.load());
  CHECK(hasher->bcrypt_calls() <= static_cast<uint64_t>(Cores()));

  pause.Release();  // the apply is over
  REQUIRE(WaitFor([&] { return job->finished.load(); }));
  CHECK(seen.is_ready());
  REQUIRE(job->result.has_value());
  CHECK(job->result->ok());
  CHECK(hasher->bcrypt_calls() == static_cast<uint64_t>(total));
  {
    std::lock_guard<std::mutex> lock(seen.mutex);
    REQUIRE(!seen.pending.empty());
    CHECK(seen.pending.back() == 0);
    CHECK(seen.pending.size() == static_cast<size_t>(total) + 1);  // each password, then the end
  }
  StopHashJob(job, pause);
  CHECK(job == nullptr);
}

TEST_CASE("hashing held by the pause stops when cancelled, without the ready hook",
          "[pass][hashing]") {
  std::unique_ptr<HashJob> job = JobForGeneratedMesh();
  HashingPause pause;
  Seen seen;
  pause.Hold();
  StartHashThread(*job, pause, seen.Hooks(), 1, model::UsersScope::kServer);
  REQUIRE(WaitFor([&] { return pause.waiting() == 1; }));

  // The pause is still held: cancelling must wake the waiter, not wait for the pass.
  CHECK(StopHashJobWithin(job, pause, std::chrono::seconds(30)) == HashingStop::kStopped);
  CHECK(job == nullptr);
  CHECK(!seen.is_ready());
  pause.Release();
}

TEST_CASE("hashing with no pass holding the pause runs to the end", "[pass][hashing]") {
  std::unique_ptr<HashJob> job = JobForGeneratedMesh();
  const int64_t total = job->pending.load();
  HashingPause pause;
  Seen seen;
  StartHashThread(*job, pause, seen.Hooks(), 1, model::UsersScope::kServer);
  REQUIRE(WaitFor([&] { return seen.is_ready(); }));
  CHECK(job->finished.load());
  CHECK(job->pending.load() == 0);
  CHECK(seen.calls() == static_cast<size_t>(total) + 1);  // each password, then the end
  StopHashJob(job, pause);
}

}  // namespace
}  // namespace mesh::reconciler
