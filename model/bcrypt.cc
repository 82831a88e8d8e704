// BcryptHasher: deterministic bcrypt ("$2b$") hashes through libxcrypt.
//
// Why deterministic: the users file must render to the same bytes while the records do not
// change (contract section 5), or every pass would rewrite it and reload the server. bcrypt
// draws a random salt, so the salt is derived instead:
//
//   K    = bcrypt(salt_key, fixed salt, same cost)          computed once, in the constructor
//   salt = HMAC-SHA256(key = K, msg = user + '\0' + password), first 16 bytes
//   hash = bcrypt(password, crypt_gensalt_rn("$2b$", cost, salt))
//
// The salt is a function of the password, so it must not become a fast oracle: without K, a
// guesser cannot compute a candidate salt at HMAC speed and compare it with the salt visible in
// the hash. K is secret (it is stretched from the reconciler's own password) and costs a full
// bcrypt to derive from a guess of that password, so the salt never makes a guess cheaper than
// bcrypt itself. The user name in the message gives two principals with the same password
// different salts, hence different hashes.
//
// Hashing costs tens of milliseconds at cost 10, so results are cached by (user,
// SHA-256(password)): re-rendering unchanged records is free, and the cache holds no plain text.
// Across processes, the cache is seeded from the users file on disk (Adopt, with the hashes that
// ReusableHashes proves through their credential digests, keyed with
//   D = HMAC-SHA256(key = K, msg = "mesh-reconciler credential digest key v1")
// so that a hash is computed once per (user, password, cost) for the life of the bus.
#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <utility>

#include "model/digest.h"
#include "model/thread_safety.h"
#include "model/users_file.h"

namespace mesh::model {
namespace {

constexpr char kPrefix[] = "$2b$";
constexpr int kSaltBytes = 16;  // bcrypt's salt size, what crypt_gensalt_rn expects as rbytes
// The fixed salt that stretches salt_key into K. Any 16 constant bytes; changing them changes
// every rendered hash.
constexpr char kKeySalt[kSaltBytes + 1] = "mesh-reconciler!";
// HashAll uses more than one thread from this many uncached plain passwords on.
constexpr size_t kParallelThreshold = 4;
// The message that derives the digest key D from K (no NUL: never a salt message).
constexpr char kDigestKeyMessage[] = "mesh-reconciler credential digest key v1";

// Every core, as the system reports them.
size_t HashingThreads(size_t work) {
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::min(cores, work);
}

// One bcrypt computation. `work` is libxcrypt's scratch space (about 32 KiB): one per thread.
Result<std::string> Crypt(const std::string& phrase, const std::string& setting, crypt_data& work) {
  std::memset(&work, 0, sizeof work);
  const char* out = crypt_rn(phrase.c_str(), setting.c_str(), &work, sizeof work);
  if (out == nullptr || out[0] == '*') {
    return Result<std::string>(Errc::kInternal, "bcrypt failed (libxcrypt crypt_rn)");
  }
  std::string hash(out);
  std::memset(&work, 0, sizeof work);  // the scratch space held the password
  return hash;
}

Result<std::string> Setting(int cost, const unsigned char* salt) {
  char setting[CRYPT_GENSALT_OUTPUT_SIZE];
  if (crypt_gensalt_rn(kPrefix, static_cast<unsigned long>(cost),
                       reinterpret_cast<const char*>(salt), kSaltBytes, setting,
                       sizeof setting) == nullptr) {
    return Result<std::string>(Errc::kInvalidArgument,
                               "bcrypt: cannot make a salt at cost " + std::to_string(cost));
  }
  return std::string(setting);
}

}  // namespace

struct BcryptHasher::Impl {
  int cost = kDefaultCost;
  std::string salt_key;                 // kept for DigestKeyAt's other costs; cleansed
  std::map<int, DigestKey> other_keys;  // DigestKeyAt: D at other costs (empty: none)
  Status key_status;     // not ok when K could not be derived (e.g. a cost out of range)
  std::string key;       // K
  DigestKey digest_key;  // D, derived from K
  std::map<std::pair<UserName, std::string>, std::string> cache;  // (user, sha256) -> hash
  std::unique_ptr<crypt_data> work = std::make_unique<crypt_data>();
  std::atomic<uint64_t> bcrypt_calls{0};

  // The deterministic hash of a plain password (no cache).
  Result<std::string> HashPlain(const UserName& user, const std::string& password,
                                crypt_data& scratch) {
    if (!key_status.ok()) return key_status;
    if (password.find('\0') != std::string::npos) {
      return Result<std::string>(Errc::kInvalidArgument,
                                 "the password of \"" + user.str() + "\" contains a NUL byte");
    }
    std::string message = user.str();
    message += '\0';
    message += password;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
             reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
             &mac_len) == nullptr ||
        mac_len < kSaltBytes) {
      return Result<std::string>(Errc::kInternal, "HMAC-SHA256 failed");
    }
    OPENSSL_cleanse(message.data(), message.size());
    Result<std::string> setting = Setting(cost, mac);
    if (!setting.ok()) return setting;
    bcrypt_calls.fetch_add(1, std::memory_order_relaxed);
    return Crypt(password, *setting, scratch);
  }
};

// K and D at `cost` for `salt_key` (the header's derivation).
static Result<std::string> StretchedKey(const std::string& salt_key, int cost, crypt_data& work) {
  Result<std::string> setting = Setting(cost, reinterpret_cast<const unsigned char*>(kKeySalt));
  return setting.ok() ? Crypt(salt_key, *setting, work) : Result<std::string>(setting.status());
}
static DigestKey DigestKeyOf(const std::string& stretched) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha256(), stretched.data(), static_cast<int>(stretched.size()),
           reinterpret_cast<const unsigned char*>(kDigestKeyMessage), sizeof kDigestKeyMessage - 1,
           mac, &mac_len) == nullptr) {
    return DigestKey();
  }
  DigestKey key(std::string(reinterpret_cast<const char*>(mac), mac_len));
  OPENSSL_cleanse(mac, sizeof mac);
  return key;
}

BcryptHasher::BcryptHasher(const std::string& salt_key, int cost) : impl_(new Impl) {
  impl_->cost = cost;
  impl_->salt_key = salt_key;
  Result<std::string> key = StretchedKey(salt_key, cost, *impl_->work);
  if (key.ok()) {
    impl_->key = std::move(key).value();
    impl_->digest_key = DigestKeyOf(impl_->key);
  } else {
    impl_->key_status = key.status();
  }
}

BcryptHasher::~BcryptHasher() {
  if (impl_) {
    OPENSSL_cleanse(impl_->key.data(), impl_->key.size());
    OPENSSL_cleanse(impl_->salt_key.data(), impl_->salt_key.size());
  }
}

const DigestKey& BcryptHasher::DigestKeyAt(int cost) {
  if (cost == impl_->cost) return impl_->digest_key;
  auto it = impl_->other_keys.find(cost);
  if (it != impl_->other_keys.end()) return it->second;
  DigestKey key;
  if (cost >= 4 && cost <= std::max(kMaxOtherKeyCost, impl_->cost)) {
    Result<std::string> stretched = StretchedKey(impl_->salt_key, cost, *impl_->work);
    if (stretched.ok()) {
      key = DigestKeyOf(*stretched);
      OPENSSL_cleanse(stretched->data(), stretched->size());
    }
  }
  return impl_->other_keys.emplace(cost, std::move(key)).first->second;
}

std::optional<std::string> BcryptHasher::Cached(const UserName& user,
                                                const Credential& credential) const {
  if (credential.kind == Credential::Kind::kBcrypt) return credential.secret;
  if (credential.kind != Credential::Kind::kPlain) return std::nullopt;
  auto it = impl_->cache.find({user, Sha256(credential.secret)});
  if (it == impl_->cache.end()) return std::nullopt;
  return it->second;
}

Result<std::string> BcryptHasher::Hash(const UserName& user, const Credential& credential) {
  switch (credential.kind) {
    case Credential::Kind::kNone:
      return Result<std::string>(Errc::kInvalidArgument,
                                 "\"" + user.str() + "\" has no credential to hash");
    case Credential::Kind::kBcrypt:
      return credential.secret;
    case Credential::Kind::kPlain:
      break;
  }
  auto cache_key = std::make_pair(user, Sha256(credential.secret));
  if (auto it = impl_->cache.find(cache_key); it != impl_->cache.end()) return it->second;
  Result<std::string> hash = impl_->HashPlain(user, credential.secret, *impl_->work);
  if (hash.ok()) impl_->cache.emplace(std::move(cache_key), *hash);
  return hash;
}

Result<HashedCredentials> BcryptHasher::HashAll(const DesiredState& desired,
                                                const Progress& progress) {
  // Plain passwords not yet in the cache are hashed first, on every core when there are
  // several (each thread with its own libxcrypt scratch space; the cache is only touched here).
  std::vector<const Principal*> todo;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    if (!impl_->cache.count({p.user, Sha256(p.credential.secret)})) todo.push_back(&p);
  }
  if (!todo.empty()) {
    std::vector<Result<std::string>> results(todo.size(), Result<std::string>(std::string()));
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::atomic<bool> stopped{false};
    Mutex progress_mutex;
    auto run = [&](crypt_data& scratch) {
      for (size_t i = next.fetch_add(1); i < todo.size() && !stopped.load();
           i = next.fetch_add(1)) {
        results[i] = impl_->HashPlain(todo[i]->user, todo[i]->credential.secret, scratch);
        const size_t finished = done.fetch_add(1) + 1;
        if (progress) {
          MutexLock lock(progress_mutex);
          if (!progress(finished, todo.size())) stopped.store(true);
        }
      }
    };
    const size_t threads = todo.size() >= kParallelThreshold ? HashingThreads(todo.size()) : 1;
    std::vector<std::unique_ptr<crypt_data>> scratch;
    std::vector<std::thread> helpers;
    for (size_t t = 1; t < threads; ++t) {
      scratch.push_back(std::make_unique<crypt_data>());
      helpers.emplace_back([&run, work = scratch.back().get()] { run(*work); });
    }
    run(*impl_->work);
    for (std::thread& helper : helpers) helper.join();
    if (stopped.load()) return Status(Errc::kUnavailable, "hashing stopped before the end");
    for (size_t i = 0; i < todo.size(); ++i) {
      if (!results[i].ok()) return results[i].status();
      impl_->cache.emplace(std::make_pair(todo[i]->user, Sha256(todo[i]->credential.secret)),
                           *results[i]);
    }
  }

  HashedCredentials out;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind == Credential::Kind::kNone) continue;
    Result<std::string> hash = Hash(p.user, p.credential);
    if (!hash.ok()) return hash.status();
    out.emplace(p.user, std::move(hash).value());
  }
  return out;
}

size_t BcryptHasher::Adopt(const DesiredState& desired, const HashedCredentials& verified) {
  size_t adopted = 0;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    auto hash = verified.find(p.user);
    if (hash == verified.end()) continue;
    impl_->cache.insert_or_assign(std::make_pair(p.user, Sha256(p.credential.secret)),
                                  hash->second);
    ++adopted;
  }
  return adopted;
}

size_t BcryptHasher::Uncached(const DesiredState& desired) const {
  size_t uncached = 0;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    if (!impl_->cache.count({p.user, Sha256(p.credential.secret)})) ++uncached;
  }
  return uncached;
}

int BcryptHasher::cost() const {
  return impl_->cost;
}

const DigestKey& BcryptHasher::digest_key() const {
  return impl_->digest_key;
}

uint64_t BcryptHasher::bcrypt_calls() const {
  return impl_->bcrypt_calls.load(std::memory_order_relaxed);
}

HashedCredentials ProvenBy(BcryptHasher& hasher, const DesiredState& desired,
                           std::string_view existing, OtherCostHashes other_costs) {
  return ProvenHashes(desired, existing, [&](int cost) -> const DigestKey* {
    if (cost != hasher.cost() && other_costs == OtherCostHashes::kRehash) return nullptr;
    return &hasher.DigestKeyAt(cost);
  });
}

Result<RenderedUsersFile> RenderUsersFileReusing(const DesiredState& desired,
                                                 std::string_view existing, BcryptHasher& hasher,
                                                 UsersScope scope,
                                                 const BcryptHasher::Progress& progress,
                                                 OtherCostHashes other_costs) {
  hasher.Adopt(desired, ProvenBy(hasher, desired, existing, other_costs));
  return RenderUsersFileCached(desired, hasher, scope, progress);
}

Result<RenderedUsersFile> RenderUsersFileCached(const DesiredState& desired, BcryptHasher& hasher,
                                                UsersScope scope,
                                                const BcryptHasher::Progress& progress) {
  Result<HashedCredentials> hashes = hasher.HashAll(desired, progress);
  if (!hashes.ok()) return hashes.status();
  // A kept hash of another cost keeps its digest, keyed at its cost (ProvenHashes).
  Result<CredentialDigests> digests = DigestAll(
      desired, *hashes, [&](int cost) -> const DigestKey* { return &hasher.DigestKeyAt(cost); });
  if (!digests.ok()) return digests.status();
  return RenderUsersFile(desired, *hashes, scope, *digests);
}

bool BcryptHasher::Verify(const std::string& password, const std::string& hash) {
  if (password.find('\0') != std::string::npos) return false;
  auto work = std::make_unique<crypt_data>();
  Result<std::string> computed = Crypt(password, hash, *work);
  if (!computed.ok() || computed->size() != hash.size()) return false;
  return CRYPTO_memcmp(computed->data(), hash.data(), hash.size()) == 0;
}

}  // namespace mesh::model
