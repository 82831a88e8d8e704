// The hold for the whole bus: one record in the lease's KV bucket (key "hold" beside the lease's
// "holder"), written when on-call holds a leased daemon (`mesh-reconciler hold`), read by every
// instance at each lease round and again just before a pass acts. While it stands (its `until`
// has not passed) every instance observes only, including one started later: a pod
// rescheduled in the middle of a restore starts held.
//
// The record ends when it is deleted (`mesh-reconciler release` through any instance) or when
// its `until` passes. The bucket's max age is the lease's time to live, so an instance that sees
// the record in force writes it again (compare-and-set on its revision, one writer wins) once it
// is older than a third of that: the record outlives any one instance, not the whole fleet
// (with every instance down longer than the time to live, it ages out, and nothing acts anyway).
// `until` is wall-clock time (hours, read by people); the age of an entry is the server's store
// time against this instance's wall clock, only to decide when to write it again.
//
// Pure: no I/O, no clock (`now` is passed in). Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/result.h"

namespace mesh::reconciler {

inline constexpr char kBusHoldKey[] = "hold";
inline constexpr const char* kBusHoldSchema = "mesh-reconciler/bus-hold/v1";

// "$KV.mesh_reconciler_lease.hold": the subject the record's writes and its deletion go to.
std::string BusHoldSubject();

struct BusHold {
  int64_t until_unix_ms = 0;
  std::string reason;   // as on-call gave it
  std::string by;       // the client's address as the instance that wrote it saw it
  std::string through;  // the lease identity of the instance that wrote it
};

// The record as stored: {"schema":..., "until_unix_ms":N, "reason":R, "by":A, "through":I}.
std::string EncodeBusHold(const BusHold& hold);
// kInvalidArgument for anything else (another program's value under the key): such a record
// holds nothing, and the caller says so.
Result<BusHold> ParseBusHold(std::string_view text);

bool InForce(const BusHold& hold, int64_t now_unix_ms);

// Whether an entry stored `age` ago must be written again to outlive the bucket's max age `ttl`.
bool NeedsRefresh(std::chrono::milliseconds age, std::chrono::milliseconds ttl);

// The bus hold as an instance last read it.
struct BusHoldView {
  std::optional<BusHold> hold;  // the record, when one is stored and in force
  std::string error;            // why it could not be read (then nothing is known: act on no
                                // JetStream object, as with a lease that cannot be read)
  bool known() const { return error.empty(); }
};

}  // namespace mesh::reconciler
