#include "observers/cnats_teardown.h"

#include <utility>

namespace mesh::observers {

RetiredSubscriptions::~RetiredSubscriptions() {
  // Reached only when the owner did not hand them to CloseConnection: the connection they were
  // on may still be read, so they are left to the process (cnats frees them with nothing).
  for (SubscriptionPtr& sub : pending_) (void)sub.release();
}

void RetiredSubscriptions::Retire(natsConnection* nc, SubscriptionPtr sub, Flush flush,
                                  std::chrono::milliseconds timeout) {
  if (sub) {
    // Closed to the read loop from here on: an error means it already was (a closed connection).
    (void)natsSubscription_Unsubscribe(sub.get());
    pending_.push_back(std::move(sub));
  }
  if (pending_.empty() || flush == Flush::kSkip) return;
  if (natsConnection_FlushTimeout(nc, static_cast<int64_t>(timeout.count())) != NATS_OK) return;
  pending_.clear();  // the read loop has read the PONG: it is past every one of them
}

void CloseConnection(ConnectionPtr connection, std::vector<SubscriptionPtr> subscriptions,
                     RetiredSubscriptions retired) {
  if (connection) natsConnection_Close(connection.get());
  subscriptions.clear();
  retired.pending_.clear();
  connection.reset();
}

}  // namespace mesh::observers
