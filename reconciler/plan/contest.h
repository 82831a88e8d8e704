// Fight detection: two writers (a second reconciler with other records, a person, another
// operator) that keep setting the same field of a stream or consumer each to its own value.
// Each of our updates is followed by theirs, whose advisory wakes our repair pass at once, and
// so on at network speed (issue 38: 1,586 updates in 30 s). An object this reconciler updated
// that is found changed back in a field it set, to another value, within `window` of the update,
// is "contested": its updates are skipped until a backoff per object expires (initial, doubling
// with each contest of the object in a row, at most `cap`). An update that then holds for the
// window ends the contest (the next one starts from the initial backoff again).
//
// Each contest is reported once (ContestReview::found: the fields, ours and the one found), and
// objects whose update is skipped are noted in their drift entry. Two reconcilers with
// different records then make a few updates a minute between them, slowing down, each saying
// why, instead of thousands.
//
// Pure: no I/O, and no clock read (the caller passes `now`). Thread-safety: a value; one
// thread (the reconcile thread) uses it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reconciler/plan/plan.h"

namespace mesh::reconciler {

struct ContestOptions {
  // A change back within this long after our update is a contest; an update that holds this
  // long ends one.
  std::chrono::milliseconds window{std::chrono::minutes(10)};
  std::chrono::milliseconds backoff_initial{std::chrono::seconds(10)};
  std::chrono::milliseconds backoff_cap{std::chrono::minutes(30)};
};

// One contest found: an object we updated, changed back.
struct ContestFound {
  ObjectKind kind = ObjectKind::kStream;
  std::string name;
  // The fields we set that were found changed: `wanted` is ours, `found` the other writer's.
  std::vector<FieldDiff> fields;
  int round = 1;  // contests of this object in a row (1, 2, ...)
  std::chrono::milliseconds backoff{0};
};

struct ContestReview {
  std::vector<ContestFound> found;  // new contests: log each once, count them
  size_t skipped = 0;               // updates left out of the plan (backed off)
};

class Contests {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit Contests(ContestOptions options = {}) : options_(options) {}

  // Before applying `plan` at `now`: finds the objects changed back since our update (new
  // contests, backed off from now), and removes from `plan->actions` the updates of every
  // object still backed off, noting the backoff in its drift entry. Other actions are kept.
  ContestReview Review(PlanResult* plan, TimePoint now);
  // After applying: `done`, the actions that succeeded (only its updates are read, so a caller
  // may give those alone); its updates are ours (what `plan`'s drift entry for each wanted), to
  // be watched for a change back.
  void NoteApplied(const PlanResult& plan, const std::vector<Action>& done, TimePoint now);
  // Notes the backoff in the drift entries of objects backed off at `now` (a plan made again
  // after applying; Review notes its own).
  void Annotate(std::vector<DriftEntry>* drift, TimePoint now) const;
  // Objects in a contest: backed off now, or updated after a backoff and not yet held for the
  // window.
  size_t contested() const;

 private:
  struct Entry {
    std::vector<FieldDiff> ours;  // the fields our last update set (wanted)
    std::optional<TimePoint> updated;
    int rounds = 0;  // contests in a row
    std::optional<TimePoint> backoff_until;
  };
  using Key = std::pair<ObjectKind, std::string>;
  void Forget(TimePoint now);

  ContestOptions options_;
  std::map<Key, Entry> entries_;
};

// Backoff after `round` (>= 1) contests in a row: backoff_initial * 2^(round-1), at most cap.
std::chrono::milliseconds ContestBackoff(int round, const ContestOptions& options);

}  // namespace mesh::reconciler
