// The records: what the mesh's control plane says should exist (contract section 1).
// `ParseRecords` turns the JSON document into typed structures and enforces every rule of the
// contract's Validation section, reporting all errors at once, each with its JSON path.
//
// Pure: no I/O, no clock. Thread-safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/result.h"

namespace mesh::model {

// The largest records document accepted; a larger one is refused with an error at "$".
inline constexpr size_t kMaxRecordsBytes = 16 * 1024 * 1024;

struct Credential {
  enum class Kind { kNone, kPlain, kBcrypt };
  Kind kind = Kind::kNone;
  std::string secret;  // the plain password or the bcrypt hash; empty for kNone. Never logged.
  bool operator==(const Credential&) const = default;
};

struct FollowRef {  // "<seat>.<event>"
  std::string seat;
  std::string event;
  bool operator==(const FollowRef&) const = default;
};

struct Bus {
  std::string account = "MESH";
  int replicas = 1;                         // 1, 3 or 5
  int64_t events_max_age_seconds = 604800;  // >= 120
  bool operator==(const Bus&) const = default;
};

struct Controller {
  std::string user;
  Credential credential;
  std::vector<std::string> submits_to;  // seat names
  std::vector<FollowRef> follows;
  bool operator==(const Controller&) const = default;
};

struct Node {
  std::string name;
  Credential credential;
  bool operator==(const Node&) const = default;
};

struct Seat {
  std::string name;
  std::vector<std::string> accepts;  // work kinds
  std::vector<std::string> emits;    // events
  std::vector<std::string> uses;     // seat names
  bool operator==(const Seat&) const = default;
};

struct Module {
  std::string name;
  Credential credential;
  std::vector<Seat> seats;
  std::vector<FollowRef> follows;
  bool operator==(const Module&) const = default;
};

struct Role {  // a mesh seat ("mesh-..."), held by nodes
  Seat seat;
  std::vector<std::string> holders;  // node names
  bool operator==(const Role&) const = default;
};

struct Records {
  int version = 1;
  std::string mesh;
  Bus bus;
  Controller controller;
  std::vector<Node> nodes;
  std::vector<Module> modules;
  std::vector<Role> roles;
  bool operator==(const Records&) const = default;
};

struct ValidationError {
  std::string path;     // "modules[1].seats[0].uses[0]", or "$" for the document as a whole
  std::string message;  // "unknown seat \"mesh-bild\""
  std::string ToString() const { return path + ": " + message; }
  bool operator==(const ValidationError&) const = default;
};

struct ParseOptions {
  std::string reconciler_user = "mesh-reconciler";  // reserved: no principal may use it
};

struct ParseOutcome {
  Records records;                      // meaningful only when errors is empty
  std::vector<ValidationError> errors;  // every error found, in document order
  bool ok() const { return errors.empty(); }
};

// Parses and validates. Never throws on bad input; any input size, any bytes.
ParseOutcome ParseRecords(std::string_view json, const ParseOptions& options = {});

// True when `name` matches ^[a-z][a-z0-9-]{0,31}$ (principals, seats, work kinds, events).
bool IsValidName(std::string_view name);

}  // namespace mesh::model
