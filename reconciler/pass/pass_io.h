// What a pass reads and opens outside itself, in one value a test can replace: the observer
// (observers/observer.h) and the opening of its bus connection (bus_connect.h). Writes are
// apply/'s, through its targets.
//
// Thread-safety: `open` is called on a second thread while the pass renders, and the observer's
// UsersFile and Server on a second thread while the pass lists the account.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "observers/observer.h"
#include "reconciler/pass/bus_connect.h"

namespace mesh::reconciler {

struct PassIo {
  std::shared_ptr<observers::Observer> observer = observers::LiveObserver();
  // An opener that succeeds without a connection (a test's in-memory bus) leaves the account
  // to the observer alone; apply then has no bus, and the JetStream actions it is given fail
  // as not connected.
  std::function<OpenedConnection(uint64_t pass_id, ConnectInputs inputs)> open = OpenConnection;
};

}  // namespace mesh::reconciler
