// Test support: a plain cnats connection for tests that use cnats APIs directly (the lease's KV
// store, the users file's permissions), connected the way the reconciler connects: as `user`,
// with the inbox prefix "_INBOX.<user>" that the contract's permissions allow. A one-attempt
// variant reports failure as a status, for tests that expect a connection to be refused.
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

// How a client of the one-attempt ConnectNats below differs from the reconciler.
struct NatsClientOptions {
  bool own_inbox_prefix = true;  // "_INBOX.<user>"; false: cnats' default "_INBOX."
  // The connection's asynchronous error callback (e.g. a permission violation), if any.
  natsErrHandler error_handler = nullptr;
  void* error_closure = nullptr;
};

// One connection attempt to `url` as `user`, never reconnecting: the connection, or null with
// `status` set (and cnats' error text in nats_GetLastError on this thread). Does not throw.
NatsConnectionPtr ConnectNats(const std::string& url, const std::string& user,
                              const std::string& password, const NatsClientOptions& options,
                              natsStatus& status);

}  // namespace mesh::testing
