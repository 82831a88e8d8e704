// Test support: a plain cnats connection for tests that use cnats APIs directly (the lease's KV
// store), connected the way the reconciler connects: as `user`, with the inbox prefix
// "_INBOX.<user>" that the contract's permissions allow.
//
// Ownership: the returned pointer owns the connection (natsConnection_Destroy).
// Thread-safety: as cnats.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace mesh::testing {

struct NatsConnectionDeleter {
  void operator()(natsConnection* p) const { natsConnection_Destroy(p); }
};
using NatsConnectionPtr = std::unique_ptr<natsConnection, NatsConnectionDeleter>;

// Throws std::runtime_error (with cnats' error text) when the connection fails.
NatsConnectionPtr ConnectNats(const std::vector<std::string>& urls, const std::string& user,
                              const std::string& password,
                              std::chrono::milliseconds timeout = std::chrono::seconds(2));

}  // namespace mesh::testing
