// Shared fixtures of the model tests: the example records, the reconciler's identity, and
// cheap bcrypt hashes for large generated meshes. Header-only (the test glob compiles only
// *_test.cc files). Thread-safety: none needed (test thread only).
#pragma once

#include <catch2/catch.hpp>
#include <string>

#include "model/desired.h"
#include "model/records.h"
#include "model/users_file.h"
#include "tests/support/nats_server.h"

namespace mesh::model::test {

inline constexpr char kReconcilerPassword[] = "test-only-reconciler-password";
// bcrypt's smallest cost: property tests over thousands of users stay fast.
inline constexpr int kCheapCost = 4;

inline std::string ExamplePath() {
  return std::string(MESH_SOURCE_DIR) + "/examples/records.json";
}

inline Records ParseOrFail(const std::string& json) {
  ParseOutcome outcome = ParseRecords(json);
  std::string errors;
  for (const ValidationError& e : outcome.errors) errors += "  " + e.ToString() + "\n";
  INFO(errors);
  REQUIRE(outcome.ok());
  return std::move(outcome.records);
}

inline Records Example() {
  return ParseOrFail(mesh::testing::ReadFile(ExamplePath()));
}

inline ReconcilerIdentity Reconciler() {
  ReconcilerIdentity identity;
  identity.credential.kind = Credential::Kind::kPlain;
  identity.credential.secret = kReconcilerPassword;
  return identity;
}

inline DesiredState DeriveExample() {
  return Derive(Example(), Reconciler());
}

// The principal named `user`; fails the test when there is none.
inline const Principal& PrincipalOf(const DesiredState& desired, const std::string& user) {
  for (const Principal& p : desired.principals) {
    if (p.user.str() == user) return p;
  }
  FAIL("no principal " << user);
  throw std::logic_error("unreachable");
}

}  // namespace mesh::model::test
