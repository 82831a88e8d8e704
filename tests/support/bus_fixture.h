// Test support for code that talks to the bus: a users.conf holding the reconciler's user with
// exactly the contract's permissions (section 4), and BusSettings pointing at a NatsServer.
//
// Thread-safety: plain functions over values.
#pragma once

#include <string>
#include <vector>

#include "observers/bus.h"
#include "tests/support/nats_server.h"

namespace mesh::testing {

inline constexpr const char* kReconcilerUser = "mesh-reconciler";
inline constexpr const char* kReconcilerPassword = "reconciler-secret";

// Account MESH (JetStream enabled) with the unrestricted "admin"/"admin" and the reconciler's
// user: publish $JS.API.> (and `extra_publish`, e.g. the lease's KV subject), subscribe
// _INBOX.<user>.> and $JS.EVENT.ADVISORY.>.
std::string ReconcilerUsersConf(const std::vector<std::string>& extra_publish = {});

// Settings for `user` on `server` (short timeouts suited to loopback tests).
observers::BusSettings BusSettingsFor(const NatsServer& server,
                                      const std::string& user = kReconcilerUser,
                                      const std::string& password = kReconcilerPassword);

}  // namespace mesh::testing
