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
#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "model/digest.h"
#include "model/users_file.h"

namespace mesh::model {
namespace {

constexpr char kPrefix[] = "$2b$";
constexpr int kSaltBytes = 16;  // bcrypt's salt size, what crypt_gensalt_rn expects as rbytes
// The fixed salt that stretches salt_key into K. Any 16 constant bytes; changing them changes
// every rendered hash.
constexpr char kKeySalt[kSaltBytes + 1] = "mesh-reconciler!";
// HashAll uses a second thread from this many uncached plain passwords on.
constexpr size_t kParallelThreshold = 4;

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
  Status key_status;  // not ok when K could not be derived (e.g. a cost out of range)
  std::string key;    // K
  std::map<std::pair<UserName, std::string>, std::string> cache;  // (user, sha256) -> hash
  std::unique_ptr<crypt_data> work = std::make_unique<crypt_data>();

  // The deterministic hash of a plain password (no cache).
  Result<std::string> HashPlain(const UserName& user, const std::string& password,
                                crypt_data& scratch) const {
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
    return Crypt(password, *setting, scratch);
  }
};

BcryptHasher::BcryptHasher(const std::string& salt_key, int cost) : impl_(new Impl) {
  impl_->cost = cost;
  Result<std::string> setting = Setting(cost, reinterpret_cast<const unsigned char*>(kKeySalt));
  Result<std::string> key = setting.ok() ? Crypt(salt_key, *setting, *impl_->work)
                                         : Result<std::string>(setting.status());
  if (key.ok()) {
    impl_->key = std::move(key).value();
  } else {
    impl_->key_status = key.status();
  }
}

BcryptHasher::~BcryptHasher() {
  if (impl_) OPENSSL_cleanse(impl_->key.data(), impl_->key.size());
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

Result<HashedCredentials> BcryptHasher::HashAll(const DesiredState& desired) {
  // Plain passwords not yet in the cache are hashed first, on two threads when there are
  // several (each with its own libxcrypt scratch space; the cache is only touched here).
  std::vector<const Principal*> todo;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    if (!impl_->cache.count({p.user, Sha256(p.credential.secret)})) todo.push_back(&p);
  }
  if (todo.size() >= kParallelThreshold) {
    std::vector<Result<std::string>> results(todo.size(), Result<std::string>(std::string()));
    auto run = [&](size_t first, size_t step, crypt_data& scratch) {
      for (size_t i = first; i < todo.size(); i += step) {
        results[i] = impl_->HashPlain(todo[i]->user, todo[i]->credential.secret, scratch);
      }
    };
    auto second_work = std::make_unique<crypt_data>();
    std::thread second([&] { run(1, 2, *second_work); });
    run(0, 2, *impl_->work);
    second.join();
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

bool BcryptHasher::Verify(const std::string& password, const std::string& hash) {
  if (password.find('\0') != std::string::npos) return false;
  auto work = std::make_unique<crypt_data>();
  Result<std::string> computed = Crypt(password, hash, *work);
  if (!computed.ok() || computed->size() != hash.size()) return false;
  return CRYPTO_memcmp(computed->data(), hash.data(), hash.size()) == 0;
}

}  // namespace mesh::model
