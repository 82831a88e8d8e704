// The server's floors, which the benchmarks set the reconciler beside: bare loops of the
// requests an observation or a recovery cannot do without, sent over a connection with nothing
// around them (no process, no credentials, no planning). A reply that is missing or an API
// error ends the benchmark (exit 1, the request named on stderr).
//
// Thread-safety: free functions; each uses the connection it is given, as BusConnection allows.
#pragma once

#include <cstdint>
#include <vector>

#include "model/desired.h"
#include "observers/bus.h"

namespace mesh::testing {

// The minimal list requests of an observation (every stream list page, then every consumer
// list page of every stream), max_in_flight outstanding, answers parsed and nothing decoded:
// the floor under which no observation can go on one connection. With Spread::kLanes the
// consumer lists go over the bus's lanes as well (as a large observation sends them, up to
// 2.11.9): the floor over the same connections. Returns the number of requests.
int64_t BareListLoop(observers::BusConnection& bus,
                     observers::Spread spread = observers::Spread::kOneConnection);

// Every creation an empty store needs for `desired`, streams first, then consumers.
struct Creations {
  std::vector<observers::ApiRequest> streams;
  std::vector<observers::ApiRequest> consumers;
};
Creations CreationsFor(const model::DesiredState& desired);

// The server's floor after a wipe: the creations of CreationsFor, streams then consumers, kept
// max_in_flight (16) outstanding per connection like apply, with no process, credentials or
// observation around them. Up to 2.11.9 the server handles a client connection's JetStream API
// requests one after another in its read loop, so on one connection this is the fastest it can
// recover, whatever the client does; over the lanes (`spread`), what the server does with its
// cores.
void PipelinedCreationLoop(observers::BusConnection& bus, const model::DesiredState& desired,
                           observers::Spread spread);

}  // namespace mesh::testing
