#include "reconciler/pass/recreation_wait.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "observers/server_version.h"
#include "observers/store_folder.h"
#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

using Clock = RecreationWait::Clock;

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// Sleeps until `settled_at()` has passed, asking it again at each poll (an advisory or an
// answer may move it meanwhile), and at most kRemovalSettleMax after `begin`.
template <typename SettledAt>
void PollUntilSettled(Clock::time_point begin, SettledAt settled_at) {
  for (Clock::time_point until = settled_at();
       Clock::now() < until && Clock::now() - begin < kRemovalSettleMax; until = settled_at()) {
    std::this_thread::sleep_for(kRemovalPoll);
  }
}

}  // namespace

void RecreationWait::RememberStreams(const observers::ObservedState& observed,
                                     Clock::time_point began) {
  seen_at_ = began;
  seen_streams_.clear();
  for (const observers::ObservedStream& s : observed.jetstream.streams) {
    seen_streams_.emplace(s.config.name, 0);
  }
  for (const observers::ObservedConsumer& c : observed.jetstream.consumers) {
    if (auto it = seen_streams_.find(c.config.stream); it != seen_streams_.end()) ++it->second;
  }
}

std::optional<std::string> RecreationWait::StoreFolderToWatch(
    uint64_t pass_id, const observers::ObservedServer& server,
    const std::vector<std::string>& recreated, std::optional<uint64_t> bus_client_id) {
  if (settings_.store_dir.empty()) return std::nullopt;
  auto unusable = [&](const std::string& why) -> std::optional<std::string> {
    Log(LogLevel::kWarn, pass_id, "--store-dir not used for this recreation; settling instead",
        {{"reason", why}});
    return std::nullopt;
  };
  if (!server.reachable) return unusable("the monitoring endpoint (--monitor) is unreachable");
  if (!bus_account_) {
    const std::optional<uint64_t> cid = bus_client_id;
    if (!cid) return unusable("not connected to the bus");
    Result<std::string> account = observers::ObserveConnectionAccount(
        settings_.monitor_url, *cid, settings_.bus.request_timeout);
    if (!account.ok()) return unusable("the connection's account: " + account.status().ToString());
    bus_account_ = *account;
  }
  // Inspected again at each use: a folder with no layout at start gets it at the first stream.
  Result<observers::StoreDir> store = observers::InspectStoreDir(settings_.store_dir);
  if (!store.ok()) return unusable(store.status().message());
  if (store->layout == observers::StoreDirLayout::kPrintedFolder && !store_dir_parent_logged_) {
    store_dir_parent_logged_ = true;  // the CLI logs it at start when it can already tell
    Log(LogLevel::kWarn, pass_id,
        "--store-dir is the folder nats-server prints as its Store Directory; using its parent "
        "(give the parent to silence this)",
        {{"given", settings_.store_dir}, {"store_dir", store->path}});
  }
  const std::string folder = observers::StreamsFolder(store->path, *bus_account_);
  if (std::find(store->accounts.begin(), store->accounts.end(), *bus_account_) ==
      store->accounts.end()) {
    std::string found;
    for (const std::string& a : store->accounts) found += (found.empty() ? "" : ", ") + a;
    return unusable("expected the streams of account " + *bus_account_ + " at " + folder +
                    "; the store holds " +
                    (found.empty() ? std::string("no account's streams") : "accounts " + found));
  }
  std::vector<StreamName> others;
  for (const auto& [name, consumers] : seen_streams_) {
    if (std::find(recreated.begin(), recreated.end(), name.str()) == recreated.end()) {
      others.push_back(name);
    }
  }
  if (Status mine = observers::CheckStreamsFolder(folder, others); !mine.ok()) {
    return unusable(mine.ToString());
  }
  return folder;
}

std::optional<RemovalWaited> RecreationWait::WaitForRemovedStores(
    uint64_t pass_id, const observers::ObservedState& observed, const PlanResult& plan,
    std::optional<uint64_t> bus_client_id) {
  std::vector<std::string> recreated;
  for (const Action& a : plan.actions) {
    if (a.kind == ActionKind::kCreateStream && a.stream && seen_streams_.count(a.stream->name)) {
      recreated.push_back(a.stream->name.str());
    }
  }
  // A stream the last observation listed, named by a deletion advisory since, and gone from the
  // lists while the server still names its store: being removed. The server sends a deletion's
  // advisory before it removes the store (server/stream.go stop() at v2.9.10, v2.10.27 and
  // v2.14.5: the advisory, then store.Delete), so the pass the advisory wakes can find it there,
  // and the plan reports it unrecoverable and leaves it. Nothing wakes another pass once the
  // store is gone: waited for here like any recreation, the pass creates it when it is (or
  // reports it, still there at the deadline). A store left damaged (no deletion) is not waited
  // for.
  for (const DriftEntry& e : plan.drift) {
    if (e.kind != ObjectKind::kStream || e.state != DriftState::kUnrecoverable ||
        !seen_streams_.count(StreamName(e.name))) {
      continue;
    }
    const std::optional<DeletionClock::Burst> burst = deletions_->Last(e.name);
    if (burst && burst->last >= seen_at_) recreated.push_back(e.name);
  }
  if (recreated.empty()) return std::nullopt;
  const Clock::time_point begin = Clock::now();
  RemovalWaited waited;
  const std::string names = Joined(recreated);
  // Said before: the wait may take seconds, and the pass is in it meanwhile.
  Log(LogLevel::kInfo, pass_id, "waiting for deleted streams' stores to be removed",
      {{"streams", names}});
  const observers::ObservedServer& server = observed.server;
  const auto topology = server.jetstream_cluster_size > 1 ? observers::Topology::kClustered
                                                          : observers::Topology::kStandalone;
  const bool visible =
      server.reachable &&
      observers::HealthzShowsStoresOnDisk(observers::ParseServerVersion(server.version), topology);
  std::string how;
  // With --store-dir (a standalone 2.9): the old folders' removal, seen on disk.
  std::optional<std::string> folder;
  if (!visible && topology == observers::Topology::kStandalone) {
    folder = StoreFolderToWatch(pass_id, server, recreated, bus_client_id);
  }
  // Whether any old folder is still there; nullopt when that cannot be told (then: settle).
  auto folders_present = [&]() -> std::optional<bool> {
    bool present = false;
    for (const std::string& n : recreated) {
      Result<observers::StoreFolder> f = observers::StreamFolder(*folder, StreamName(n));
      if (!f.ok()) {
        Log(LogLevel::kWarn, pass_id, "--store-dir cannot be read; settling instead",
            {{"error", f.status().ToString()}});
        return std::nullopt;
      }
      present = present || *f == observers::StoreFolder::kPresent;
    }
    return present;
  };
  std::optional<bool> present;
  if (folder) present = folders_present();
  if (present) {
    // 2.9 removes a deleted stream's folder (its consumers' are inside it) after the deletion
    // advisories, as the last step of the deletion (fileStore.Delete): gone means it is over.
    how = "until the old folders are gone from --store-dir";
    while (present && *present && Clock::now() - begin < kRemovalWait) {
      std::this_thread::sleep_for(kRemovalPoll);
      present = folders_present();
    }
    if (present && *present) {
      Log(LogLevel::kWarn, pass_id, "an old stream folder is still there; recreating anyway",
          {{"waited_ms",
            std::chrono::duration_cast<std::chrono::milliseconds>(kRemovalWait).count()}});
    }
  }
  if (present) {
    // Waited for the folders themselves (a read error leaves `present` empty: settle below).
  } else if (visible) {
    // The server names the old store until its folder is gone: wait for exactly that. A store
    // still named at the deadline stays, and the next plan reports it unrecoverable.
    how = "until the server no longer names the old store";
    auto named = [&](const std::vector<observers::ObjectHealth>& unhealthy) {
      return std::any_of(unhealthy.begin(), unhealthy.end(), [&](const observers::ObjectHealth& h) {
        return h.kind == observers::ObjectHealth::Kind::kStream &&
               std::find(recreated.begin(), recreated.end(), h.stream) != recreated.end();
      });
    };
    auto read = [&] {
      return observers::ObserveUnhealthyObjects(settings_.monitor_url,
                                                settings_.bus.request_timeout);
    };
    std::vector<observers::ObjectHealth> unhealthy = read();
    while (named(unhealthy) && Clock::now() - begin < kRemovalWait) {
      std::this_thread::sleep_for(kRemovalPoll);
      unhealthy = read();
    }
    waited.unhealthy = std::move(unhealthy);
  } else if (answers_ == observers::DeletionAnswers::kForwarded &&
             observers::DeletionAnswerMarksStoreRemoved(
                 observers::ParseServerVersion(server.version), topology)) {
    // A standalone 2.9 answers a deletion once it removed the folder (with every consumer's in
    // it), whoever asked: wait for that answer to each deletion noted since the observation
    // that saw the stream. A deletion not asked through the API (no answer ever comes) is
    // waited for up to kRemovalSettleMax; a stream gone without a deletion advisory (a store
    // wiped, advisories missed) gets the plain settle.
    how = "until the server answered the deletion (this server does not show stores on disk)";
    std::vector<std::string> unanswered;
    auto settled_at = [&] {
      Clock::time_point until = begin;
      unanswered.clear();
      for (const std::string& n : recreated) {
        std::optional<DeletionClock::Burst> burst = deletions_->Last(n);
        if (burst && burst->answered && *burst->answered >= seen_at_) continue;  // removed
        if (!burst || burst->last < seen_at_) {
          until = std::max(until, begin + kRemovalSettle);
          continue;
        }
        unanswered.push_back(n);
        until = std::max(until, begin + kRemovalSettleMax);
      }
      return until;
    };
    PollUntilSettled(begin, settled_at);
    if (!unanswered.empty()) {
      Log(LogLevel::kWarn, pass_id,
          "no answer to a stream's deletion seen (deleted other than through the API, or the "
          "answer dropped); recreating anyway",
          {{"streams", Joined(unanswered)},
           {"waited_ms",
            std::chrono::duration_cast<std::chrono::milliseconds>(kRemovalSettleMax).count()}});
    }
  } else {
    // 2.9 clusters, no monitor, no answers: nothing tells when the old folder is gone. The server
    // sends the deletion advisories (each consumer's, then the stream's) before it removes the
    // folder, and a stream created meanwhile is removed with it (acknowledged messages lost at
    // the next restart): settle, until kRemovalSettle after this wait began and after the last
    // deletion advisory naming any of these streams (more may come while we wait).
    how = "a settle after the last deletion advisory (this server does not show stores on disk)";
    auto settled_at = [&] {
      Clock::time_point until = begin + kRemovalSettle;
      for (const std::string& n : recreated) {
        // Without a deletion advisory (a store wiped, advisories missed) the plain settle from
        // `begin`; with one, the deletion may still be removing its consumers' folders.
        std::optional<DeletionClock::Burst> burst = deletions_->Last(n);
        if (!burst) continue;
        auto seen = seen_streams_.find(StreamName(n));
        const size_t consumers =
            std::max(burst->consumers, seen == seen_streams_.end() ? size_t{0} : seen->second);
        const Clock::duration settle = std::min<Clock::duration>(
            kRemovalSettle + kRemovalSettlePerConsumer * static_cast<int64_t>(consumers),
            kRemovalSettleMax);
        until = std::max(until, burst->last + settle);
      }
      return until;
    };
    PollUntilSettled(begin, settled_at);
  }
  Log(LogLevel::kInfo, pass_id, "waited for deleted streams' stores to be removed",
      {{"streams", names},
       {"how", how},
       {"waited_ms",
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - begin).count()}});
  return waited;
}

}  // namespace mesh::reconciler
