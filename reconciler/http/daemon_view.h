// What the daemon shows of itself over HTTP, as plain values: whether its loop beats, whether
// it is ready, the hold on-call put on it. The loop (reconciler/daemon/loop.h) produces them; the
// HTTP handler (reconciler/http/http_handler.h) reads them through HttpState, and never the loop
// itself, so that the handler builds without the bus.
//
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/enum_names.h"

namespace mesh::reconciler {

struct Health {
  bool alive = false;
  std::string reason;  // why not, when not
};

struct Readiness {
  bool ready = false;
  std::string reason;  // why not ("records invalid: modules[0].name: ...") or "ready"
};

// Who asks for a hold or a release, and why: logged, and shown by /drift while held.
struct HoldRequest {
  std::string reason;  // as the person gave it (--reason); empty when none was given
  std::string by;      // the client's address as the listener saw it ("127.0.0.1:51234")
};

// Which hold keeps a daemon's passes observe-only.
enum class HoldScope {
  kPod,  // this instance alone (the only kind without --lease)
  kBus,  // every instance on the bus: a record in the lease's KV bucket
         // (reconciler/plan/bus_hold.h), which instances started later read too
};
inline constexpr EnumNames<HoldScope, 2> kHoldScopeNames{{{
    {HoldScope::kPod, "pod"},
    {HoldScope::kBus, "bus"},
}}};
static_assert(kHoldScopeNames.Dense());
const char* ToString(HoldScope v);  // "pod", "bus"
std::optional<HoldScope> HoldScopeFromName(std::string_view name);

struct HoldState {
  bool held = false;
  int64_t until_unix_ms = 0;  // wall clock, for people; a pod hold expires on the steady clock
  std::string reason;         // the holder's HoldRequest, while held
  std::string by;
  HoldScope scope = HoldScope::kPod;
  // kBus: the instance whose lease identity wrote the record (empty until written), and
  // whether it is written; while it is not (or could not be: `error`), this pod alone is held.
  std::string through;
  bool published = false;
  std::string error;
};

// The longest hold on-call may ask for.
inline constexpr std::chrono::milliseconds kMaxHold{24 * 3600 * 1000};

}  // namespace mesh::reconciler
