// Opening the pass's bus connection: the login (and, after a refused password, the rotated
// one), the advisory subscriptions, and which of the deletion answers they forward.
//
// Thread-safety: OpenConnection is a free function over its own copies. The pass opens the
// connection on a second thread while it derives and renders the records
// (Reconciler::Impl::ConnectWhileRendering); taking everything by value, it cannot touch the
// pass's state, and the compiler holds that contract: what it opened is adopted on the pass's
// thread afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/result.h"
#include "observers/bus.h"
#include "observers/bus_settings.h"

namespace mesh::reconciler {

// What opening a connection needs, copied from the pass.
struct ConnectInputs {
  observers::BusSettings bus;  // the password connections log in with
  // The reconciler's own password as the users file renders it: tried after a refusal when
  // it differs (a rotation the server loaded without this instance seeing it confirmed).
  std::string own_password;
  // The daemon's sink (advisories, reconnects), or null for a one-off command: then nothing
  // is subscribed.
  observers::EventSink events;
};

// What OpenConnection opened, for the pass to adopt.
struct OpenedConnection {
  Status status;  // the connect's error, or ok
  std::unique_ptr<observers::BusConnection> bus;
  // The password the connection logged in with, when it is own_password after the one in
  // ConnectInputs::bus was refused.
  std::optional<std::string> rotated_to;
  // Whether its advisory subscriptions forward the answers to stream deletions (only where
  // they mark a removed store: DeletionAnswerMarksStoreRemoved).
  observers::DeletionAnswers answers = observers::DeletionAnswers::kNotForwarded;
};

OpenedConnection OpenConnection(uint64_t pass_id, ConnectInputs inputs);

}  // namespace mesh::reconciler
