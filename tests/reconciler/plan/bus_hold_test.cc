// The bus hold's record (reconciler/plan/bus_hold.h): pure, no bus.
#include "reconciler/plan/bus_hold.h"

#include <catch2/catch.hpp>

namespace mesh::reconciler {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE("A bus hold record reads back as written, and anything else holds nothing",
          "[hold][plan]") {
  BusHold hold;
  hold.until_unix_ms = 1764413730123;
  hold.reason = "restoring \"DECL\" \xe2\x80\x94 INC-1234";
  hold.by = "127.0.0.1:51234";
  hold.through = "mesh-1-0000beef";
  const std::string stored = EncodeBusHold(hold);
  CHECK(stored.find("\"schema\":\"mesh-reconciler/bus-hold/v1\"") != std::string::npos);
  Result<BusHold> read = ParseBusHold(stored);
  REQUIRE(read.ok());
  CHECK(read->until_unix_ms == hold.until_unix_ms);
  CHECK(read->reason == hold.reason);
  CHECK(read->by == hold.by);
  CHECK(read->through == hold.through);

  // Another program's value under the key, or a record without its end, holds nothing.
  for (const char* other : {"", "held", "{}", "[1]", "{\"until_unix_ms\":1764413730123}",
                            "{\"schema\":\"mesh-reconciler/bus-hold/v2\",\"until_unix_ms\":1}",
                            "{\"schema\":\"mesh-reconciler/bus-hold/v1\"}",
                            "{\"schema\":\"mesh-reconciler/bus-hold/v1\",\"until_unix_ms\":0}"}) {
    INFO(other);
    Result<BusHold> refused = ParseBusHold(other);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().code() == Errc::kInvalidArgument);
  }
}

TEST_CASE("A bus hold is in force until its end, and written again before the bucket ages it out",
          "[hold][plan]") {
  BusHold hold;
  hold.until_unix_ms = 1'000'000;
  CHECK(InForce(hold, 999'999));
  CHECK_FALSE(InForce(hold, 1'000'000));
  CHECK_FALSE(InForce(hold, 2'000'000));

  // The bucket keeps an entry for the lease's time to live (45 s at a 30 s interval): an
  // instance writes it again once it is a third of that old, so two rounds may fail in between.
  const milliseconds ttl = seconds(45);
  CHECK_FALSE(NeedsRefresh(seconds(0), ttl));
  CHECK_FALSE(NeedsRefresh(seconds(14), ttl));
  CHECK(NeedsRefresh(seconds(15), ttl));
  CHECK(NeedsRefresh(seconds(44), ttl));
  CHECK(BusHoldSubject() == "$KV.mesh_reconciler_lease.hold");
}

}  // namespace
}  // namespace mesh::reconciler
