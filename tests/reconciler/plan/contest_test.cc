// Fight detection (reconciler/plan/contest.h), pure: plans built by hand, the clock passed in.
#include "reconciler/plan/contest.h"

#include <catch2/catch.hpp>

namespace mesh::reconciler::test {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using TimePoint = Contests::TimePoint;

const TimePoint kT0 = TimePoint() + std::chrono::hours(1);

// EVENTS differing in max_age: ours `wanted`, found `found`; one update planned.
PlanResult EventsDiffer(const std::string& wanted, const std::string& found) {
  PlanResult plan;
  DriftEntry entry;
  entry.kind = ObjectKind::kStream;
  entry.name = "EVENTS";
  entry.state = DriftState::kDiffers;
  entry.remedy = Remedy::kUpdateInPlace;
  entry.fields = {{"max_age", wanted, found}};
  plan.drift.push_back(entry);
  Action update;
  update.kind = ActionKind::kUpdateStream;
  update.name = "EVENTS";
  plan.actions.push_back(update);
  Action create;  // another object's action, never touched
  create.kind = ActionKind::kCreateStream;
  create.name = "SEAT_x";
  plan.actions.push_back(create);
  return plan;
}

// Reviews `plan` at `now` and, when its EVENTS update is still planned, applies it.
ContestReview PassAt(Contests& contests, PlanResult plan, TimePoint now, bool* updated = nullptr) {
  ContestReview review = contests.Review(&plan, now);
  const bool update = std::any_of(plan.actions.begin(), plan.actions.end(), [](const Action& a) {
    return a.kind == ActionKind::kUpdateStream;
  });
  if (updated != nullptr) *updated = update;
  contests.NoteApplied(plan, plan.actions, now);
  return review;
}

TEST_CASE("An update changed back within the window is contested once, and backed off",
          "[contest]") {
  Contests contests;
  bool updated = false;
  // Our first repair: not a contest (we had not updated it).
  ContestReview first = PassAt(contests, EventsDiffer("7d", "1d"), kT0, &updated);
  CHECK(first.found.empty());
  CHECK(updated);
  CHECK(contests.contested() == 0);
  // The other writer sets it back: contested, with both values, and the update is skipped.
  PlanResult plan = EventsDiffer("7d", "1d");
  ContestReview second = contests.Review(&plan, kT0 + seconds(1));
  REQUIRE(second.found.size() == 1);
  CHECK(second.found[0].kind == ObjectKind::kStream);
  CHECK(second.found[0].name == "EVENTS");
  REQUIRE(second.found[0].fields.size() == 1);
  CHECK(second.found[0].fields[0].field == "max_age");
  CHECK(second.found[0].fields[0].wanted == "7d");
  CHECK(second.found[0].fields[0].found == "1d");
  CHECK(second.found[0].round == 1);
  CHECK(second.found[0].backoff == seconds(10));
  CHECK(second.skipped == 1);
  REQUIRE(plan.actions.size() == 1);
  CHECK(plan.actions[0].kind == ActionKind::kCreateStream);
  CHECK(plan.drift[0].note.find("contested") != std::string::npos);
  CHECK(contests.contested() == 1);
  // Within the backoff: skipped again, and not reported again.
  ContestReview third = PassAt(contests, EventsDiffer("7d", "1d"), kT0 + seconds(9), &updated);
  CHECK(third.found.empty());
  CHECK_FALSE(updated);
  // After it: updated once more; changed back again: round 2, twice the backoff.
  ContestReview fourth = PassAt(contests, EventsDiffer("7d", "1d"), kT0 + seconds(12), &updated);
  CHECK(fourth.found.empty());
  CHECK(updated);
  ContestReview fifth = PassAt(contests, EventsDiffer("7d", "1d"), kT0 + seconds(13), &updated);
  REQUIRE(fifth.found.size() == 1);
  CHECK(fifth.found[0].round == 2);
  CHECK(fifth.found[0].backoff == seconds(20));
  CHECK_FALSE(updated);
}

TEST_CASE("An update that holds for the window ends the contest", "[contest]") {
  ContestOptions options;
  Contests contests(options);
  PassAt(contests, EventsDiffer("7d", "1d"), kT0);
  REQUIRE(PassAt(contests, EventsDiffer("7d", "1d"), kT0 + seconds(1)).found.size() == 1);
  bool updated = false;
  PassAt(contests, EventsDiffer("7d", "1d"), kT0 + seconds(20), &updated);
  REQUIRE(updated);
  CHECK(contests.contested() == 1);
  // Converged for longer than the window: the contest is over.
  PlanResult converged;
  contests.Review(&converged, kT0 + seconds(20) + options.window + seconds(1));
  CHECK(contests.contested() == 0);
  // A change much later is a first repair again, not a contest.
  ContestReview later =
      PassAt(contests, EventsDiffer("7d", "1d"), kT0 + std::chrono::hours(2), &updated);
  CHECK(later.found.empty());
  CHECK(updated);
}

TEST_CASE("Changed records, or another field, make no contest", "[contest]") {
  Contests contests;
  PassAt(contests, EventsDiffer("7d", "1d"), kT0);
  // The records now want 2d: the drift is ours to repair, not a fight.
  ContestReview review = PassAt(contests, EventsDiffer("2d", "7d"), kT0 + seconds(1));
  CHECK(review.found.empty());
  CHECK(contests.contested() == 0);
  PlanResult other = EventsDiffer("7d", "1d");
  other.drift[0].fields = {{"subjects", "mesh.evt.>", "x.>"}};
  CHECK(contests.Review(&other, kT0 + seconds(2)).found.empty());
}

TEST_CASE("The backoff doubles up to its cap", "[contest]") {
  ContestOptions options;
  options.backoff_initial = seconds(10);
  options.backoff_cap = minutes(1);
  CHECK(ContestBackoff(1, options) == seconds(10));
  CHECK(ContestBackoff(2, options) == seconds(20));
  CHECK(ContestBackoff(3, options) == seconds(40));
  CHECK(ContestBackoff(4, options) == minutes(1));
  CHECK(ContestBackoff(1000, options) == minutes(1));
}

// Every update of a large pass is watched, each with its own drift entry's fields, whatever
// else the drift holds (NoteApplied finds them by object, not by scanning the drift for each).
TEST_CASE("Many updates in one pass are each watched with their own fields", "[contest]") {
  PlanResult plan;
  std::vector<Action> done;
  for (int i = 0; i < 3000; ++i) {
    const std::string name = "S" + std::to_string(i) + "/d";
    DriftEntry created;  // a creation before each update: its entry is not the update's
    created.kind = ObjectKind::kStream;
    created.name = name;
    plan.drift.push_back(created);
    DriftEntry entry;
    entry.kind = ObjectKind::kConsumer;
    entry.name = name;
    entry.state = DriftState::kDiffers;
    entry.remedy = Remedy::kUpdateInPlace;
    entry.fields = {{"max_deliver", std::to_string(i), "-1"}};
    plan.drift.push_back(entry);
    Action update;
    update.kind = ActionKind::kUpdateConsumer;
    update.name = name;
    done.push_back(update);
  }
  Contests contests;
  contests.NoteApplied(plan, done, kT0);
  // Changed back, each to what it was: every one is contested, with its own wanted value.
  ContestReview review = contests.Review(&plan, kT0 + seconds(1));
  REQUIRE(review.found.size() == 3000);
  for (const ContestFound& c : review.found) {
    REQUIRE(c.fields.size() == 1);
    CHECK(c.kind == ObjectKind::kConsumer);
    CHECK("S" + c.fields[0].wanted + "/d" == c.name);
  }
}

}  // namespace
}  // namespace mesh::reconciler::test
