// The users file (contract section 5): one `accounts` block, rendered to deterministic bytes.
// Rendering is pure; hashing plain passwords is done beforehand by a PasswordHasher, so that
// the same records always give the same bytes and no plain-text password is ever written.
//
// Each entry from a plain password also carries its credential digest (model/credential_digest.h),
// so that a later process reuses the hash instead of computing it again.
//
// Thread-safety: RenderUsersFile is a free function. BcryptHasher is safe to call from one
// thread at a time (it caches hashes); wrap it if shared. bcrypt_calls() may be read anywhere.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/credential_digest.h"
#include "model/desired.h"
#include "model/enum_names.h"
#include "model/result.h"

namespace mesh::model {

// Where one user's entry lies in RenderedUsersFile::bytes.
struct EntrySpan {
  size_t offset = 0;
  size_t size = 0;
};

struct RenderedUsersFile {
  std::string bytes;  // the whole file
  // Each user's entry as a place in `bytes` (for the per-user diff): the text is held once. At
  // 10x (23,020 users) a second copy of every entry, and a third while rendering, were most of
  // what the users file added to a process's peak.
  std::map<UserName, EntrySpan> entries;
  std::vector<UserName> without_credential;  // left out, to name in the report

  // The entry of `user` as rendered; nullopt when it has none. Valid while `bytes` is unchanged.
  std::optional<std::string_view> Block(const UserName& user) const;
  // The entry of `user`, copied; throws std::out_of_range when it has none (as map::at).
  std::string BlockAt(const UserName& user) const;
  // Every entry copied out, as SplitUserBlocks returns them.
  std::map<UserName, std::string> Blocks() const;
};

// What the users file holds (--users-scope):
//   kServer   the server's whole `accounts` block, included at the top level of nats.conf (the
//             project's chart owns the whole configuration);
//   kAccount  only the mesh's account entry `"<account>": { jetstream: enabled, users: [...] }`,
//             for an operator to `include` inside the `accounts` block of their own
//             configuration, beside their other accounts.
enum class UsersScope { kServer, kAccount };
inline constexpr EnumNames<UsersScope, 2> kUsersScopeNames{{{
    {UsersScope::kServer, "server"},
    {UsersScope::kAccount, "account"},
}}};
static_assert(kUsersScopeNames.Dense());
const char* ToString(UsersScope v);  // "server", "account"

// Refuses (kInvalidArgument, path "$") a rendering with no principal user but the reconciler.
// Every principal with a credential must have an entry in `hashes`. A principal with an entry
// in `digests` gets its digest comment (RenderUsersFileReusing passes them all).
Result<RenderedUsersFile> RenderUsersFile(const DesiredState& desired,
                                          const HashedCredentials& hashes,
                                          UsersScope scope = UsersScope::kServer,
                                          const CredentialDigests& digests = {});

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

  // (done, total) while HashAll computes `total` new hashes; called from the hashing threads,
  // one call at a time. Returning false stops HashAll (kUnavailable) after the hashes under way.
  using Progress = std::function<bool(size_t done, size_t total)>;

  // The hash for one principal's credential; cached by (user, password).
  Result<std::string> Hash(const UserName& user, const Credential& credential);
  // Hashes for every principal of `desired` that has a credential; the uncached plain
  // passwords on every core.
  Result<HashedCredentials> HashAll(const DesiredState& desired, const Progress& progress = {});

  // Takes `verified` (ReusableHashes: proven by their digests) into the cache for the plain
  // principals of `desired`: HashAll will not compute them again. Returns how many it took.
  size_t Adopt(const DesiredState& desired, const HashedCredentials& verified);
  // The plain passwords of `desired` not yet in the cache: what HashAll would compute.
  size_t Uncached(const DesiredState& desired) const;

  int cost() const;
  // The key of the credential digests, derived from the stretched key (empty when that failed).
  const DigestKey& digest_key() const;
  // The digest key at `cost`: digest_key() at cost(); at another cost, derived as that cost's
  // hasher would (one bcrypt of the salt key at `cost`, once, then kept), so that hashes a
  // hasher of that cost wrote are proven with one bcrypt rather than one per password. Empty
  // above kMaxOtherKeyCost (and cost()), where that one bcrypt would take minutes.
  const DigestKey& DigestKeyAt(int cost);
  static constexpr int kMaxOtherKeyCost = 16;
  // The hash of a plain password when it is cached (hashed or adopted); nothing otherwise.
  std::optional<std::string> Cached(const UserName& user, const Credential& credential) const;
  // How many passwords this hasher has run through bcrypt (the key's own stretch not counted).
  uint64_t bcrypt_calls() const;

  // True when `password` matches `hash` (used by tests and the users-file observer).
  static bool Verify(const std::string& password, const std::string& hash);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The users file for `desired` from the hasher's cache, hashing only what it lacks, with every
// digest. For a caller that has already adopted what the file on disk proves (ReusableHashes,
// then hasher.Adopt): proving it again would scan the file and check every digest twice.
Result<RenderedUsersFile> RenderUsersFileCached(const DesiredState& desired, BcryptHasher& hasher,
                                                UsersScope scope = UsersScope::kServer,
                                                const BcryptHasher::Progress& progress = {});

// What becomes of a hash of the users file that its digest proves but whose cost is not the
// hasher's (--bcrypt-cost changed): kept as written (its digest too), or hashed again at the
// hasher's cost (--rehash).
enum class OtherCostHashes { kKeep, kRehash };

// The hashes of `existing` that their digests prove (ProvenHashes, with hasher.DigestKeyAt),
// those of another cost than the hasher's only with kKeep.
HashedCredentials ProvenBy(BcryptHasher& hasher, const DesiredState& desired,
                           std::string_view existing, OtherCostHashes other_costs);

// The users file for `desired`, reusing every hash of `existing` (the users file as found, or
// empty) that its digest proves (ProvenBy), and hashing only the rest, with their digests.
Result<RenderedUsersFile> RenderUsersFileReusing(
    const DesiredState& desired, std::string_view existing, BcryptHasher& hasher,
    UsersScope scope = UsersScope::kServer, const BcryptHasher::Progress& progress = {},
    OtherCostHashes other_costs = OtherCostHashes::kKeep);

}  // namespace mesh::model
