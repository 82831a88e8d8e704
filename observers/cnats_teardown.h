// Giving up cnats subscriptions and connections without freeing what cnats' read loop may
// still be reading.
//
// cnats 3.4 (Debian 12's libnats) looks an incoming message's subscription up under the
// connection's lock, lets the lock go, and only then takes the subscription's own lock and
// queues the message, holding no reference meanwhile (v3.4.1 src/conn.c, natsConn_processMsg;
// fixed in v3.6.1 by nats.c#637, "Crash processing inbound message for destroyed
// subscription"). natsSubscription_Destroy unsubscribes and drops the last reference at once,
// so a message arriving as a subscription is destroyed is written into freed memory: heap
// corruption that shows much later ("free(): invalid next size (fast)" in
// natsConnection_Destroy, seen once in 1,600 runs of a pass test) or never.
//
// Two ways out, both keeping our reference until the read loop is known to be past the
// subscription:
//   - a subscription given up while the connection goes on: unsubscribed (the read loop no
//     longer finds it), then a flush: the server's PONG is read by the same read loop after
//     any message it was handling, so once the flush returns the subscription is freed;
//   - a connection given up: natsConnection_Close joins the read loop, and only then are the
//     subscriptions and the connection freed.
//
// Thread-safety: a connection and its subscriptions are given up by the one thread using them.
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <vector>

#include "observers/c_handle.h"

namespace mesh::observers {

using ConnectionPtr = CHandle<natsConnection, natsConnection_Destroy>;
using SubscriptionPtr = CHandle<natsSubscription, natsSubscription_Destroy>;

// Subscriptions given up on one connection, not yet freed: each waits for a flush that proves
// the read loop past it, or for the connection to be closed.
class RetiredSubscriptions {
 public:
  RetiredSubscriptions() = default;
  RetiredSubscriptions(const RetiredSubscriptions&) = delete;
  RetiredSubscriptions& operator=(const RetiredSubscriptions&) = delete;
  RetiredSubscriptions(RetiredSubscriptions&&) = default;
  RetiredSubscriptions& operator=(RetiredSubscriptions&&) = default;
  ~RetiredSubscriptions();

  // Unsubscribes `sub` on `nc` and, when `flush` and a flush within `timeout` succeeds, frees it
  // with every subscription retired before it; otherwise (no flush: the connection is lost or
  // not answering) they are freed after a later flush, or by CloseConnection.
  enum class Flush { kTry, kSkip };
  void Retire(natsConnection* nc, SubscriptionPtr sub, Flush flush,
              std::chrono::milliseconds timeout);
  size_t pending() const { return pending_.size(); }

 private:
  friend void CloseConnection(ConnectionPtr, std::vector<SubscriptionPtr>, RetiredSubscriptions);
  std::vector<SubscriptionPtr> pending_;
};

// Closes `connection` (cnats joins its read loop), then frees `subscriptions` and `retired`,
// then the connection. Null connection: frees the subscriptions only.
void CloseConnection(ConnectionPtr connection, std::vector<SubscriptionPtr> subscriptions,
                     RetiredSubscriptions retired);

}  // namespace mesh::observers
