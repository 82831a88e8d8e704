// The desired state as JSON, for people and golden tests: the `desired` CLI command prints it,
// tests/model/golden/example_desired.json holds it for the example records.
//
// Never contains a password or a hash: principals show only which kind of credential they
// have; the users file (when given) is summarised by its users, its size and its SHA-256.
// Deterministic: same input, same bytes. Pure; thread-safety: a free function over values.
#pragma once

#include <string>

#include "model/desired.h"
#include "model/users_file.h"

namespace mesh::model {

inline constexpr const char* kDesiredSchema = "mesh-reconciler/desired/v1";

// Pretty-printed JSON (2-space indent, trailing newline) with the keys "schema"
// (kDesiredSchema; docs/schemas/desired.v1.schema.json), "mesh", "account",
// "replicas", "streams", "consumers" (each with its "ack_permission"), "principals",
// "without_credential" and, when `users` is given, "users_file".
std::string DesiredToJson(const DesiredState& desired, const RenderedUsersFile* users = nullptr);

}  // namespace mesh::model
