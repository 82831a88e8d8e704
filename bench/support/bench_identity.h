// The reconciler's identity in the benchmarks that run a real nats-server: its user, its
// password, the bcrypt cost, and what follows from them for a set of records (the desired
// state, the users file the reconciler would render, bus settings connecting as itself).
// The server starts with that users file, so the reconciler connects as itself.
//
// Thread-safety: free functions over values.
#pragma once

#include <string>

#include "model/desired.h"
#include "model/result.h"
#include "observers/bus.h"

namespace mesh::testing {

inline constexpr char kBenchUser[] = "mesh-reconciler";
inline constexpr char kBenchPassword[] = "bench-only-reconciler-password";
inline constexpr int kBenchCost = 4;  // bcrypt's smallest cost

// The desired state of `records_json` with the bench reconciler as the reconciler; an
// invalid_argument error naming the first problem when the records are invalid.
Result<model::DesiredState> BenchDesired(const std::string& records_json);

// The users file the reconciler renders for `desired` (real bcrypt at kBenchCost).
Result<std::string> BenchUsersConf(const model::DesiredState& desired);

// Settings connecting to `url` as the bench reconciler.
observers::BusSettings BenchBusSettings(const std::string& url);

}  // namespace mesh::testing
