#include "reconciler/plan/contest.h"

#include <algorithm>
#include <map>
#include <string_view>
#include <utility>

namespace mesh::reconciler {
namespace {

// The fields we set that were found changed to another value, with the wanted value unchanged
// (records that changed meanwhile make no contest).
std::vector<FieldDiff> ChangedBack(const std::vector<FieldDiff>& ours,
                                   const std::vector<FieldDiff>& found) {
  std::vector<FieldDiff> changed;
  for (const FieldDiff& f : found) {
    const bool set_by_us = std::any_of(ours.begin(), ours.end(), [&](const FieldDiff& o) {
      return o.field == f.field && o.wanted == f.wanted;
    });
    if (set_by_us && f.found != f.wanted) changed.push_back(f);
  }
  return changed;
}

std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string((d.count() + 999) / 1000) + " s";
}

}  // namespace

std::chrono::milliseconds ContestBackoff(int round, const ContestOptions& options) {
  const auto cap = std::max(options.backoff_cap, options.backoff_initial);
  std::chrono::milliseconds backoff = options.backoff_initial;
  for (int i = 1; i < round && backoff < cap; ++i) backoff = std::min(backoff * 2, cap);
  return backoff;
}

ContestReview Contests::Review(PlanResult* plan, TimePoint now) {
  Forget(now);
  ContestReview review;
  for (DriftEntry& entry : plan->drift) {
    if (entry.remedy != Remedy::kUpdateInPlace) continue;
    auto it = entries_.find({entry.kind, entry.name});
    if (it == entries_.end()) continue;
    Entry& e = it->second;
    if (e.updated && now - *e.updated <= options_.window) {
      std::vector<FieldDiff> changed = ChangedBack(e.ours, entry.fields);
      if (!changed.empty()) {
        ++e.rounds;
        const auto backoff = ContestBackoff(e.rounds, options_);
        e.backoff_until = now + backoff;
        e.updated.reset();
        review.found.push_back({entry.kind, entry.name, std::move(changed), e.rounds, backoff});
      }
    }
  }
  Annotate(&plan->drift, now);
  auto backed_off = [&](const Action& a) {
    if (!IsUpdate(a.kind)) return false;
    auto it = entries_.find({KindOf(a.kind), a.name});
    return it != entries_.end() && it->second.backoff_until && now < *it->second.backoff_until;
  };
  const size_t before = plan->actions.size();
  std::erase_if(plan->actions, backed_off);
  review.skipped = before - plan->actions.size();
  return review;
}

void Contests::Annotate(std::vector<DriftEntry>* drift, TimePoint now) const {
  for (DriftEntry& entry : *drift) {
    if (entry.remedy != Remedy::kUpdateInPlace) continue;
    auto it = entries_.find({entry.kind, entry.name});
    if (it == entries_.end()) continue;
    const Entry& e = it->second;
    if (!e.backoff_until || now >= *e.backoff_until) continue;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*e.backoff_until - now);
    const std::string note = "contested: another writer changes it back; not updated for " +
                             Seconds(left) + " (round " + std::to_string(e.rounds) + ")";
    entry.note = entry.note.empty() ? note : entry.note + "; " + note;
  }
}

void Contests::NoteApplied(const PlanResult& plan, const std::vector<Action>& done, TimePoint now) {
  if (std::none_of(done.begin(), done.end(), [](const Action& a) { return IsUpdate(a.kind); })) {
    return;
  }
  // Each object's (first) drift entry, found once: a pass that updates every consumer of a
  // large mesh searched the whole drift once per update (35,206 by 41,409 at ten times the
  // Large mesh).
  std::map<std::pair<ObjectKind, std::string_view>, const DriftEntry*> drift_of;
  for (const DriftEntry& d : plan.drift)
    drift_of.emplace(std::pair<ObjectKind, std::string_view>(d.kind, d.name), &d);
  for (const Action& a : done) {
    if (!IsUpdate(a.kind)) continue;
    const ObjectKind kind = KindOf(a.kind);
    auto drift = drift_of.find({kind, a.name});
    if (drift == drift_of.end()) continue;
    Entry& e = entries_[{kind, a.name}];
    e.ours = drift->second->fields;
    e.updated = now;
    e.backoff_until.reset();
  }
}

size_t Contests::contested() const {
  return static_cast<size_t>(std::count_if(entries_.begin(), entries_.end(),
                                           [](const auto& kv) { return kv.second.rounds > 0; }));
}

void Contests::Forget(TimePoint now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    Entry& e = it->second;
    const bool backing_off = e.backoff_until && now < *e.backoff_until;
    if (e.updated && now - *e.updated > options_.window) {
      // Our update held for the window: whatever contest there was is over.
      e.updated.reset();
      e.rounds = 0;
    }
    // Backed off, and not updated since (nothing to update: the other value went, or the
    // records changed): the contest is over once a window has passed since.
    if (!e.updated && !backing_off && e.backoff_until && now - *e.backoff_until > options_.window) {
      e.rounds = 0;
    }
    if (!e.updated && !backing_off && e.rounds == 0) {
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace mesh::reconciler
