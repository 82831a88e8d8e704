// Synthetic meshes for tests and benchmarks: valid records (they pass ParseRecords) of any
// size, the same records for the same MeshSize (seed included), and their JSON form.
//
// Shape: nodes "node-<i>"; modules "mod-<i>", each with `seats_per_module` seats
// "seat-<i>-<j>"; roles "mesh-role-<i>", each held by `holders_per_role` distinct nodes. Every
// seat accepts 1 to 3 work kinds and emits 1 or 2 events; module seats use 1 or 2 other seats,
// roles use one module seat when there is one. Every module follows `follows_per_module`
// distinct events of other seats; the controller follows kControllerFollows events and submits
// to up to kControllerSubmits seats.
//
// Pure; thread-safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>

#include "model/records.h"

namespace mesh::testing {

enum class CredentialMix {
  kPlain,  // every principal has a plain password
  kMixed,  // plain passwords, some password_bcrypt, some principals without a credential
};

struct MeshSize {
  int nodes = 0;
  int modules = 0;
  int seats_per_module = 0;
  int roles = 0;
  int follows_per_module = 0;
  int holders_per_role = 0;
  uint64_t seed = 1;
  CredentialMix credentials = CredentialMix::kPlain;

  static MeshSize Small();
  static MeshSize Medium();
  // 2,000 nodes, 300 modules of 2 seats, 20 roles, 3 follows per module: 623 streams,
  // 3,526 consumers, 2,302 users (the reconciler's included).
  static MeshSize Large();
  // Every count multiplied by `factor` (seats per module and follows per module unchanged).
  MeshSize Times(int factor) const;
  MeshSize WithSeed(uint64_t new_seed) const;
  MeshSize WithCredentials(CredentialMix mix) const;
};

inline constexpr int kControllerFollows = 5;
inline constexpr int kControllerSubmits = 3;

model::Records GenerateMesh(const MeshSize& size);

// The records in the contract's JSON format (section 1): ParseRecords(ToJson(r)) gives r back.
std::string ToJson(const model::Records& records);

}  // namespace mesh::testing
