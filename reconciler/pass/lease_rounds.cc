#include "reconciler/pass/lease_rounds.h"

#include <string>
#include <utility>

#include "reconciler/base/log.h"

namespace mesh::reconciler {

void LeaseRounds::Start() {
  if (settings_.lease != LeaseMode::kKv || keeper_) return;
  keeper_ = std::make_unique<LeaseKeeper>(LeaseSettings{
      NewLeaseIdentity(), LeaseTtlFor(settings_.interval, settings_.bus.request_timeout),
      settings_.bus.request_timeout});
}

LeaseState LeaseRounds::Round(uint64_t pass_id, natsConnection* connection) {
  last_round_ = Clock::now();
  const LeaseState before = keeper_->state();
  const BusHoldView hold_before = keeper_->bus_hold();
  LeaseState state = keeper_->Round(connection, cluster_size_, Clock::now(), UnixMillisNow());
  NoteBusHold(pass_id, hold_before);
  if (std::string note = keeper_->TakeReplicasNote(); !note.empty()) {
    Log(LogLevel::kInfo, pass_id, "lease bucket", {{"replicas", note}});
  }
  if (std::string note = keeper_->TakeMaxAgeNote(); !note.empty()) {
    Log(LogLevel::kInfo, pass_id, "lease bucket", {{"max_age", note}});
  }
  // A change of role, or a round failing for another reason than the last one: an instance
  // that cannot reach the lease says why (it starts "unknown", so a first round that fails
  // would otherwise say nothing), once per reason rather than every round.
  if (state.role != before.role || state.error != before.error) {
    Log(LogLevel::kInfo, pass_id, "lease",
        {{"role", ToString(state.role)}, {"holder", state.holder}, {"error", state.error}});
  }
  return state;
}

LeaseRounds::HoldVerdict LeaseRounds::CheckBusHold(uint64_t pass_id, natsConnection* connection,
                                                   PassReport& report) {
  const BusHoldView before = keeper_->bus_hold();
  const BusHoldView& view = keeper_->CheckBusHold(connection, cluster_size_, UnixMillisNow());
  NoteBusHold(pass_id, before);
  if (!view.known()) return HoldVerdict::kUnknown;
  if (!view.hold) return HoldVerdict::kAct;
  report.bus_hold = view.hold;
  return HoldVerdict::kHeld;
}

ChunkDecision LeaseRounds::Fence(uint64_t pass_id, observers::BusConnection* bus) {
  // A chunk is answered (or times out, perhaps carried out all the same) within the request
  // timeout: it is sent only when it would end under the lease. A round renews the lease when
  // one is due, or when too little of it is left for the chunk.
  const std::chrono::milliseconds longest = settings_.bus.request_timeout;
  if (bus && bus->connected() &&
      (Clock::now() - last_round_ >= LeaseRoundFor(settings_.interval) ||
       AccessForWrite(keeper_->state(), Clock::now(), longest) != JetStreamAccess::kAct)) {
    Round(pass_id, bus->native_handle());
  }
  const LeaseState& state = keeper_->state();
  if (AccessForWrite(state, Clock::now(), longest) == JetStreamAccess::kAct) return {};
  Log(LogLevel::kWarn, pass_id, "lease lapsed during the pass: not applying the rest",
      {{"role", ToString(state.role)}, {"holder", state.holder}, {"error", state.error}});
  return {ChunkVerdict::kStop,
          std::string("this instance no longer holds the lease (") + ToString(state.role) + ")"};
}

LeaseChange LeaseRounds::RoundBetweenPasses(observers::BusConnection* bus) {
  // Before the first pass (no keeper yet) or without a bus, the next pass runs the round.
  if (!keeper_ || !bus || !bus->connected()) return LeaseChange::kNone;
  const bool was_holder = keeper_->state().role == LeaseRole::kHolder;
  const bool was_held = keeper_->bus_hold().hold.has_value();
  const LeaseState state = Round(0, bus->native_handle());
  if (state.role == LeaseRole::kHolder && !was_holder) return LeaseChange::kAcquired;
  const BusHoldView& hold = keeper_->bus_hold();
  if (was_held && !hold.hold && hold.known()) return LeaseChange::kHoldEnded;
  return LeaseChange::kNone;
}

Status LeaseRounds::WriteBusHold(natsConnection* connection, BusHold hold) {
  hold.through = keeper_->lease().identity();
  return keeper_->WriteBusHold(connection, cluster_size_, hold);
}

Status LeaseRounds::DeleteBusHold(natsConnection* connection) {
  return keeper_->DeleteBusHold(connection, cluster_size_);
}

void LeaseRounds::Release(observers::BusConnection* bus) {
  if (!keeper_ || !keeper_->lease().MayHold()) return;
  if (!bus || !bus->connected()) return;  // it ages out on its own
  const Status released = keeper_->Release(bus->native_handle(), cluster_size_);
  Log(released.ok() ? LogLevel::kInfo : LogLevel::kWarn, 0, "lease released",
      {{"error", released.ok() ? std::string() : released.ToString()}});
}

void LeaseRounds::NoteBusHold(uint64_t pass_id, const BusHoldView& before) {
  const BusHoldView& now = keeper_->bus_hold();
  if (now.hold && (!before.hold || before.hold->until_unix_ms != now.hold->until_unix_ms ||
                   before.hold->through != now.hold->through)) {
    Log(LogLevel::kInfo, pass_id, "bus held: passes observe only",
        {{"scope", "bus"},
         {"by", now.hold->by},
         {"reason", now.hold->reason},
         {"through", now.hold->through},
         {"until", FormatRfc3339Millis(now.hold->until_unix_ms)}});
  } else if (before.hold && !now.hold && now.known()) {
    Log(LogLevel::kInfo, pass_id, "bus hold ended: passes apply again",
        {{"scope", "bus"}, {"held_by", before.hold->by}, {"held_reason", before.hold->reason}});
  } else if (!now.known() && now.error != before.error) {
    Log(LogLevel::kWarn, pass_id, "bus hold unreadable: acting on the users file only",
        {{"error", now.error}});
  }
}

}  // namespace mesh::reconciler
