// cnats status codes as Status values. cnats keeps its error text per thread and overwrites it
// with the next failing call, so NatsError must be called right after the call that failed.
//
// Thread-safety: reads the calling thread's cnats error only.
#pragma once

#include <nats/nats.h>

#include <string>

#include "model/result.h"

namespace mesh::observers {

Errc ErrcOf(natsStatus s);

// "<context>: <cnats' text>", without cnats' source location prefix ("(conn.c:1905): ").
Status NatsError(natsStatus s, const std::string& context);

}  // namespace mesh::observers
