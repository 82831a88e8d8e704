#include "reconciler/pass/bus_connect.h"

#include <utility>

#include "observers/server_version.h"
#include "reconciler/base/log.h"

namespace mesh::reconciler {

OpenedConnection OpenConnection(uint64_t pass_id, ConnectInputs inputs) {
  OpenedConnection out;
  auto connected = observers::BusConnection::Connect(inputs.bus, inputs.events);
  if (!connected.ok() && connected.status().code() == Errc::kRefused &&
      inputs.bus.password != inputs.own_password) {
    // A rotation whose users file the server loaded without this instance seeing it confirmed
    // (the server was down at the write, or restarted since): it now refuses the old password.
    observers::BusSettings rotated = inputs.bus;
    rotated.password = inputs.own_password;
    auto again = observers::BusConnection::Connect(rotated, inputs.events);
    if (again.ok()) {
      out.rotated_to = inputs.own_password;
      Log(LogLevel::kInfo, pass_id, "the server has the rotated password: connecting with it");
      connected = std::move(again);
    }
  }
  if (!connected.ok()) {
    out.status = connected.status();
    return out;
  }
  out.bus = std::move(*connected);
  Log(LogLevel::kInfo, pass_id, "connected to the bus", {{"url", out.bus->connected_url()}});
  if (inputs.events) {
    // The answers to stream deletions, where they tell a recreation when the old store is gone
    // (the topology is not known yet: a 2.9 cluster takes them too, and does not use them).
    const observers::DeletionAnswers answers =
        observers::DeletionAnswerMarksStoreRemoved(out.bus->server_version(),
                                                   observers::Topology::kStandalone)
            ? observers::DeletionAnswers::kForwarded
            : observers::DeletionAnswers::kNotForwarded;
    if (Status s = out.bus->SubscribeAdvisories(answers); !s.ok()) {
      Log(LogLevel::kWarn, pass_id, "advisories not subscribed", {{"error", s.ToString()}});
    } else {
      out.answers = answers;
    }
  }
  return out;
}

}  // namespace mesh::reconciler
