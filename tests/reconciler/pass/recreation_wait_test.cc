// DeletionClock, without a server: what the cnats threads note and the recreation wait reads.
#include "reconciler/pass/recreation_wait.h"

#include <catch2/catch.hpp>
#include <memory>

namespace mesh::reconciler {
namespace {

using Clock = DeletionClock::Clock;
using std::chrono::milliseconds;

TEST_CASE("The deletion clock keeps each stream's last advisory, its burst and its last answer",
          "[pass]") {
  DeletionClock clock;
  const Clock::time_point t0 = Clock::now();
  CHECK_FALSE(clock.Last("DECL"));
  clock.Note({"DECL", true}, t0);
  clock.Note({"DECL", true}, t0 + milliseconds(10));
  clock.Note({"DECL", false}, t0 + milliseconds(20));
  std::optional<DeletionClock::Burst> burst = clock.Last("DECL");
  REQUIRE(burst);
  CHECK(burst->last == t0 + milliseconds(20));
  CHECK(burst->consumers == 2);
  CHECK_FALSE(burst->answered);
  clock.NoteAnswered("DECL", t0 + milliseconds(30));
  burst = clock.Last("DECL");
  REQUIRE(burst);
  CHECK(burst->answered == t0 + milliseconds(30));
  CHECK(burst->last == t0 + milliseconds(20));  // an answer is not a deletion advisory
  // A later burst starts its count again and keeps the earlier answer (the wait compares it
  // with when the stream was last seen).
  clock.Note({"DECL", true}, t0 + milliseconds(1000));
  burst = clock.Last("DECL");
  REQUIRE(burst);
  CHECK(burst->consumers == 1);
  CHECK(burst->answered == t0 + milliseconds(30));
}

TEST_CASE("An answer alone is kept, and answers outside the scope are not", "[pass]") {
  DeletionClock clock;
  const Clock::time_point t0 = Clock::now();
  // Answers and advisories come on different cnats threads: the answer may be noted first.
  clock.NoteAnswered("EVENTS", t0);
  std::optional<DeletionClock::Burst> burst = clock.Last("EVENTS");
  REQUIRE(burst);
  CHECK(burst->answered == t0);
  CHECK(burst->last == Clock::time_point{});
  auto scope = std::make_shared<AdvisoryScope>();
  scope->streams.insert("DECL");
  clock.SetScope(scope);
  CHECK_FALSE(clock.Last("EVENTS"));  // dropped with the scope
  clock.NoteAnswered("KV_config", t0);
  clock.Note({"KV_config", false}, t0);
  CHECK_FALSE(clock.Last("KV_config"));
  clock.NoteAnswered("DECL", t0);
  CHECK(clock.Last("DECL"));
}

}  // namespace
}  // namespace mesh::reconciler
