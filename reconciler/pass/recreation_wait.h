// Recreating a stream deleted since the last observation: before the pass creates it again,
// it waits until the server has removed the old store (docs/faults.md, "Recreation"), or a
// stream created meanwhile would be removed with it.
//
// Thread-safety: DeletionClock is safe from any thread (the cnats thread notes advisories, the
// pass reads them). RecreationWait is used by the pass's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/names.h"
#include "model/thread_safety.h"
#include "observers/bus.h"
#include "observers/jetstream.h"
#include "observers/monitor.h"
#include "reconciler/pass/pass_settings.h"
#include "reconciler/plan/advisory_filter.h"
#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

// Recreating a stream deleted since the last observation (WaitForRemovedStores): how long to
// wait at most for the server to stop naming its old store (or for deletion advisories to stop
// coming), how often to look, and the settle after the last deletion advisory where the server
// cannot tell.
inline constexpr auto kRemovalWait = std::chrono::seconds(5);
inline constexpr auto kRemovalPoll = std::chrono::milliseconds(2);
inline constexpr auto kRemovalSettle = std::chrono::milliseconds(200);
// On 2.9 the folder goes with every consumer's in it (their own deletion leaves them to the
// stream's): 3,000 consumers took 430 ms after the last advisory here (ext4, 2 cores), so the
// settle grows by a millisecond per consumer the old stream had, about 7x that, up to a bound.
inline constexpr auto kRemovalSettlePerConsumer = std::chrono::milliseconds(1);
inline constexpr auto kRemovalSettleMax = std::chrono::seconds(10);

// When each stream was last named by a deletion advisory (DeletionNamed), as received, and how
// many of its consumers' deletions came in that burst (advisories less than kRemovalSettle
// apart): the settle before recreating a deleted stream counts from the last one and grows
// with the consumers (a stream being deleted deletes each consumer first, an advisory each).
// Also when the server last answered a deletion of it with success (kStreamDeletionAnswered),
// where that answer tells the store is gone (DeletionAnswerMarksStoreRemoved). Answers and
// advisories come on different cnats threads (the server sends them from different goroutines
// too), so their order is never relied on.
// Streams outside the last pass's scope are not kept (a foreign client's ephemerals come and go
// all day); before any scope, at most kMaxTracked, the oldest dropped first. Thread-safe:
// written on the cnats threads, read by the pass.
class DeletionClock {
 public:
  using Clock = std::chrono::steady_clock;
  struct Burst {
    Clock::time_point last;  // the last deletion advisory (Clock::time_point{} before any)
    size_t consumers = 0;    // consumer deletions in the burst
    std::optional<Clock::time_point> answered;  // the last successful deletion answer
  };
  void SetScope(std::shared_ptr<const AdvisoryScope> scope) {
    MutexLock lock(mutex_);
    scope_ = std::move(scope);
    std::erase_if(bursts_,
                  [&](const auto& entry) REQUIRES(mutex_) { return !InScope(entry.first); });
  }
  void Note(const DeletionAdvisory& advisory, Clock::time_point at) {
    MutexLock lock(mutex_);
    if (!InScope(advisory.stream)) return;
    auto it = bursts_.find(advisory.stream);
    if (it == bursts_.end()) {
      it = Track(advisory.stream, at);
    } else if (at - it->second.last > kRemovalSettle) {
      it->second.consumers = 0;  // a new burst
    }
    it->second.last = at;
    if (advisory.consumer) ++it->second.consumers;
  }
  void NoteAnswered(std::string_view stream, Clock::time_point at) {
    MutexLock lock(mutex_);
    if (!InScope(stream)) return;
    auto it = bursts_.find(stream);
    if (it == bursts_.end()) it = Track(stream, Clock::time_point{});
    it->second.answered = at;
  }
  std::optional<Burst> Last(std::string_view stream) const {
    MutexLock lock(mutex_);
    auto it = bursts_.find(stream);
    if (it == bursts_.end()) return std::nullopt;
    return it->second;
  }

 private:
  static constexpr size_t kMaxTracked = 1024;
  using Bursts = std::map<std::string, Burst, std::less<>>;
  Bursts::iterator Track(std::string_view stream, Clock::time_point last) REQUIRES(mutex_) {
    if (bursts_.size() >= kMaxTracked) {
      bursts_.erase(std::min_element(
          bursts_.begin(), bursts_.end(),
          [](const auto& a, const auto& b) { return a.second.last < b.second.last; }));
    }
    return bursts_.emplace(std::string(stream), Burst{last, 0, std::nullopt}).first;
  }
  bool InScope(std::string_view stream) const REQUIRES(mutex_) {
    return scope_ == nullptr || scope_->streams.count(stream) != 0;
  }
  mutable Mutex mutex_;
  std::shared_ptr<const AdvisoryScope> scope_ GUARDED_BY(mutex_);  // null before a pass
  Bursts bursts_ GUARDED_BY(mutex_);
};

// What WaitForRemovedStores found when it had waited. On a server that shows stores on disk
// the wait read its unhealthy objects last (newer than the observation's): the caller plans
// again with them instead of reading the whole server again.
struct RemovalWaited {
  std::optional<std::vector<observers::ObjectHealth>> unhealthy;  // nullopt: not read
};

// The pass's side of a recreation: what the last observation saw, and the wait itself.
class RecreationWait {
 public:
  using Clock = std::chrono::steady_clock;
  // `settings` (--store-dir, --monitor, the request timeout) must outlive this object.
  explicit RecreationWait(const PassSettings& settings) : settings_(settings) {}

  // Shared with the event sink given to the bus, which cnats may call until the bus is gone.
  const std::shared_ptr<DeletionClock>& deletions() const { return deletions_; }
  // A new bus connection: its account is looked up again when a recreation needs it.
  void ForgetAccount() { bus_account_.reset(); }
  // Whether this connection forwards the answers to stream deletions (SubscribeAdvisories).
  void SetDeletionAnswers(observers::DeletionAnswers answers) { answers_ = answers; }
  // The streams of an observation begun at `began`, and how many consumers each had: a
  // deletion counts for a recreation when noted after `began` (a stream listed then was not
  // being deleted yet: the server drops a stream from its lists first).
  void RememberStreams(const observers::ObservedState& observed, Clock::time_point began);
  // Before recreating a stream that the previous observation saw (deleted since), waits until
  // the server has removed the old store (docs/faults.md, "Recreation"); also for such a stream
  // that the plan left unrecoverable because the server still names its store, when a deletion
  // advisory named it since (being removed). Set when it waited: the caller observes the
  // streams and plans again. `bus_client_id`: the connection's id on the server (for
  // --store-dir's account), nullopt when not connected.
  std::optional<RemovalWaited> WaitForRemovedStores(uint64_t pass_id,
                                                    const observers::ObservedState& observed,
                                                    const PlanResult& plan,
                                                    std::optional<uint64_t> bus_client_id);

 private:
  // With --store-dir, on a standalone server: the folder of the account's streams there, once
  // checked to be this server's (it holds a stream the last observation saw, other than
  // `recreated`); nullopt (logged) when it cannot be used.
  std::optional<std::string> StoreFolderToWatch(uint64_t pass_id,
                                                const observers::ObservedServer& server,
                                                const std::vector<std::string>& recreated,
                                                std::optional<uint64_t> bus_client_id);

  const PassSettings& settings_;
  std::shared_ptr<DeletionClock> deletions_ = std::make_shared<DeletionClock>();
  // The account of the bus connection (/connz), once a recreation needed it (StoreFolderToWatch).
  std::optional<std::string> bus_account_;
  bool store_dir_parent_logged_ = false;       // StoreFolderToWatch's warning, once
  std::map<StreamName, size_t> seen_streams_;  // in the last observation: their consumers
  Clock::time_point seen_at_;                  // when that observation began
  observers::DeletionAnswers answers_ = observers::DeletionAnswers::kNotForwarded;
};

}  // namespace mesh::reconciler
