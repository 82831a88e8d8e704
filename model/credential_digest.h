// Credential digests: what lets a later process prove, without bcrypt, that a hash it finds in
// the users file belongs to the current password (docs/conventions.md section 6.1).
//
// Each entry rendered from a plain password carries a comment line
//
//   # credential digest: hmac-sha256-v1 <64 hex digits>
//
// the HMAC-SHA-256, under a DigestKey, of (user, hash, password). The key is derived from the
// bcrypt-stretched key of BcryptHasher (itself stretched from the reconciler's own password), so
// whoever reads the file cannot test a guessed password faster than bcrypt allows: computing a
// digest needs the key, and the key costs a bcrypt of a guess of the reconciler's password.
//
// Pure: no I/O, no clock. Thread-safety: free functions over values; DigestKey is a value.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "model/desired.h"
#include "model/result.h"

namespace mesh::model {

// user name -> the bcrypt hash to write for that user.
using HashedCredentials = std::map<UserName, std::string>;
// user name -> the digest written beside that user's hash (only for plain passwords).
using CredentialDigests = std::map<UserName, std::string>;

// The secret HMAC key of the digests (32 bytes). Empty: no digest is made, nothing is reused.
class DigestKey {
 public:
  DigestKey() = default;
  explicit DigestKey(std::string bytes) : bytes_(std::move(bytes)) {}
  DigestKey(const DigestKey&) = default;
  DigestKey& operator=(const DigestKey&) = default;
  ~DigestKey();  // the bytes are cleansed

  bool empty() const { return bytes_.empty(); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// The comment's prefix, as rendered (after the entry's indentation).
inline constexpr std::string_view kDigestCommentPrefix = "# credential digest: hmac-sha256-v1 ";

// The digest (64 lowercase hex digits) of `password` hashed to `hash` for `user`.
Result<std::string> CredentialDigest(const DigestKey& key, const UserName& user,
                                     std::string_view hash, std::string_view password);

// The digests of every principal of `desired` with a plain password, from `hashes`.
Result<CredentialDigests> DigestAll(const DesiredState& desired, const HashedCredentials& hashes,
                                    const DigestKey& key);

// The reuse decision. For each principal of `desired` with a plain password whose entry in
// `file_bytes` (a users file as found on disk, in any scope or layout SplitUserBlocks reads)
// carries a bcrypt hash at `cost` and a digest that `key` proves was made for this user, this
// hash and this password: that hash. Everything else (new or changed passwords, a hand-edited
// hash or digest, another cost, another key, no digest) is absent and must be hashed.
HashedCredentials ReusableHashes(const DesiredState& desired, std::string_view file_bytes,
                                 const DigestKey& key, int cost);

// The cost of a "$2b$NN$..." hash; nullopt for any other form.
std::optional<int> HashCost(std::string_view hash);

// The digest key at a bcrypt cost (BcryptHasher::DigestKeyAt); null: none at that cost.
using DigestKeyAt = std::function<const DigestKey*(int cost)>;

// ReusableHashes for hashes of any cost: each entry's digest is proven with the key at its own
// hash's cost (a digest is always keyed with the key stretched at the cost of the hash it
// covers). A hash of another cost than the one rendered now is the operator's to re-hash
// (--rehash); otherwise it is kept as written, digest included.
HashedCredentials ProvenHashes(const DesiredState& desired, std::string_view file_bytes,
                               const DigestKeyAt& key_at);

// DigestAll with each hash's digest keyed at that hash's cost.
Result<CredentialDigests> DigestAll(const DesiredState& desired, const HashedCredentials& hashes,
                                    const DigestKeyAt& key_at);

// user -> the hash each entry of `file_bytes` holds as written, proven or not (entries in the
// rendered layout only). While new hashes are computed, an interim users file keeps these for
// the principals not yet hashed: it is what the server has loaded already.
HashedCredentials WrittenHashes(std::string_view file_bytes);

}  // namespace mesh::model
