// The users file (contract section 5): one `accounts` block, rendered to deterministic bytes.
// Rendering is pure; hashing plain passwords is done beforehand by a PasswordHasher, so that
// the same records always give the same bytes and no plain-text password is ever written.
//
// Thread-safety: RenderUsersFile is a free function. BcryptHasher is safe to call from one
// thread at a time (it caches hashes); wrap it if shared.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/desired.h"
#include "model/result.h"

namespace mesh::model {

// user name -> the bcrypt hash to write for that user.
using HashedCredentials = std::map<UserName, std::string>;

struct RenderedUsersFile {
  std::string bytes;                         // the whole file
  std::map<UserName, std::string> blocks;    // each user's entry as rendered (for per-user diff)
  std::vector<UserName> without_credential;  // left out, to name in the report
};

// What the users file holds (--users-scope):
//   kServer   the server's whole `accounts` block, included at the top level of nats.conf (the
//             project's chart owns the whole configuration);
//   kAccount  only the mesh's account entry `"<account>": { jetstream: enabled, users: [...] }`,
//             for an operator to `include` inside the `accounts` block of their own
//             configuration, beside their other accounts.
enum class UsersScope { kServer, kAccount };
const char* ToString(UsersScope v);  // "server", "account"

// Refuses (kInvalidArgument, path "$") a rendering with no principal user but the reconciler.
// Every principal with a credential must have an entry in `hashes`.
Result<RenderedUsersFile> RenderUsersFile(const DesiredState& desired,
                                          const HashedCredentials& hashes,
                                          UsersScope scope = UsersScope::kServer);

// Splits a users file (ours or hand-edited) into user -> entry block, as RenderUsersFile lays
// them out. Entries it cannot recognise are ignored; used to say which principals differ.
std::map<UserName, std::string> SplitUserBlocks(const std::string& bytes);

// bcrypt through libxcrypt. A plain password always hashes to the same string for the same
// user (the salt is derived with a secret key, so the salt is no shortcut for a guesser);
// `password_bcrypt` credentials are passed through unchanged.
class BcryptHasher {
 public:
  static constexpr int kDefaultCost = 10;
  // `salt_key` is secret material (the reconciler's own password); it is stretched with
  // bcrypt once, here.
  BcryptHasher(const std::string& salt_key, int cost = kDefaultCost);
  ~BcryptHasher();

  // The hash for one principal's credential; cached by (user, password).
  Result<std::string> Hash(const UserName& user, const Credential& credential);
  // Hashes for every principal of `desired` that has a credential.
  Result<HashedCredentials> HashAll(const DesiredState& desired);

  // True when `password` matches `hash` (used by tests and the users-file observer).
  static bool Verify(const std::string& password, const std::string& hash);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::model
