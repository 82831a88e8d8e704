#include "model/credential_digest.h"

#include <openssl/crypto.h>
#include <openssl/hmac.h>

#include <cstdio>
#include <optional>

#include "model/users_file.h"

namespace mesh::model {
namespace {

constexpr std::string_view kDomain = "mesh-reconciler credential digest v1";

// Each field with its length in front, so that no two (user, hash, password) share a message.
void AppendField(std::string& message, std::string_view field) {
  char length[24];
  std::snprintf(length, sizeof length, "%zu:", field.size());
  message += length;
  message += field;
}

std::string Hex(const unsigned char* bytes, size_t size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 0xf];
  }
  return hex;
}

// The first line of `block` that starts (after blanks) with `prefix`: the rest of that line.
std::optional<std::string_view> LineValue(std::string_view block, std::string_view prefix) {
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find('\n', pos);
    if (end == std::string_view::npos) end = block.size();
    std::string_view line = block.substr(pos, end - pos);
    const size_t first = line.find_first_not_of(" \t");
    if (first != std::string_view::npos && line.substr(first).rfind(prefix, 0) == 0) {
      return line.substr(first + prefix.size());
    }
    pos = end + 1;
  }
  return std::nullopt;
}

// The hash of `password: "<hash>"` as RenderUsersFile writes it; nothing for any other form
// (escapes, another key): such an entry is not ours and is hashed again.
std::optional<std::string> HashInBlock(std::string_view block) {
  std::optional<std::string_view> value = LineValue(block, "password: \"");
  if (!value) return std::nullopt;
  const size_t close = value->find('"');
  if (close == std::string_view::npos ||
      value->substr(close + 1).find_first_not_of(" \t\r") != std::string_view::npos) {
    return std::nullopt;
  }
  std::string hash(value->substr(0, close));
  for (char ch : hash) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '/' || ch == '$';
    if (!ok) return std::nullopt;
  }
  return hash;
}

std::string CostPrefix(int cost) {
  char prefix[16];
  std::snprintf(prefix, sizeof prefix, "$2b$%02d$", cost);
  return prefix;
}

}  // namespace

DigestKey::~DigestKey() {
  OPENSSL_cleanse(bytes_.data(), bytes_.size());
}

Result<std::string> CredentialDigest(const DigestKey& key, const UserName& user,
                                     std::string_view hash, std::string_view password) {
  if (key.empty()) return Result<std::string>(Errc::kInternal, "no credential digest key");
  std::string message(kDomain);
  AppendField(message, user.str());
  AppendField(message, hash);
  AppendField(message, password);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  const bool ok = HMAC(EVP_sha256(), key.bytes().data(), static_cast<int>(key.bytes().size()),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
                       &mac_len) != nullptr;
  OPENSSL_cleanse(message.data(), message.size());
  if (!ok) return Result<std::string>(Errc::kInternal, "HMAC-SHA256 failed");
  return Hex(mac, mac_len);
}

Result<CredentialDigests> DigestAll(const DesiredState& desired, const HashedCredentials& hashes,
                                    const DigestKey& key) {
  CredentialDigests out;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    auto hash = hashes.find(p.user);
    if (hash == hashes.end()) continue;  // RenderUsersFile names the missing hash
    Result<std::string> digest = CredentialDigest(key, p.user, hash->second, p.credential.secret);
    if (!digest.ok()) return digest.status();
    out.emplace(p.user, std::move(digest).value());
  }
  return out;
}

HashedCredentials WrittenHashes(std::string_view file_bytes) {
  HashedCredentials written;
  for (const auto& [user, block] : SplitUserBlocks(std::string(file_bytes))) {
    std::optional<std::string> hash = HashInBlock(block);
    if (hash && hash->rfind("$2", 0) == 0) written.emplace(user, std::move(*hash));
  }
  return written;
}

std::optional<int> HashCost(std::string_view hash) {
  if (hash.size() < 7 || hash.substr(0, 4) != "$2b$" || hash[6] != '$') return std::nullopt;
  if (hash[4] < '0' || hash[4] > '9' || hash[5] < '0' || hash[5] > '9') return std::nullopt;
  const int cost = (hash[4] - '0') * 10 + (hash[5] - '0');
  if (hash != CostPrefix(cost) + std::string(hash.substr(7))) return std::nullopt;
  return cost;
}

HashedCredentials ReusableHashes(const DesiredState& desired, std::string_view file_bytes,
                                 const DigestKey& key, int cost) {
  return ProvenHashes(desired, file_bytes, [&](int c) { return c == cost ? &key : nullptr; });
}

Result<CredentialDigests> DigestAll(const DesiredState& desired, const HashedCredentials& hashes,
                                    const DigestKeyAt& key_at) {
  CredentialDigests out;
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    auto hash = hashes.find(p.user);
    if (hash == hashes.end()) continue;  // RenderUsersFile names the missing hash
    const std::optional<int> cost = HashCost(hash->second);
    const DigestKey* key = cost ? key_at(*cost) : nullptr;
    if (key == nullptr) {
      return Status(Errc::kInternal,
                    "no credential digest key at the cost of the hash of \"" + p.user.str() + "\"");
    }
    Result<std::string> digest = CredentialDigest(*key, p.user, hash->second, p.credential.secret);
    if (!digest.ok()) return digest.status();
    out.emplace(p.user, std::move(digest).value());
  }
  return out;
}

HashedCredentials ProvenHashes(const DesiredState& desired, std::string_view file_bytes,
                               const DigestKeyAt& key_at) {
  HashedCredentials reusable;
  if (file_bytes.empty()) return reusable;
  const std::map<UserName, std::string> blocks = SplitUserBlocks(std::string(file_bytes));
  for (const Principal& p : desired.principals) {
    if (p.credential.kind != Credential::Kind::kPlain) continue;
    auto block = blocks.find(p.user);
    if (block == blocks.end()) continue;
    std::optional<std::string> hash = HashInBlock(block->second);
    std::optional<std::string_view> found = LineValue(block->second, kDigestCommentPrefix);
    if (!hash || !found) continue;
    const std::optional<int> cost = HashCost(*hash);
    const DigestKey* key = cost ? key_at(*cost) : nullptr;
    if (key == nullptr || key->empty()) continue;
    const std::string_view written = found->substr(0, found->find_last_not_of(" \t\r") + 1);
    Result<std::string> expected = CredentialDigest(*key, p.user, *hash, p.credential.secret);
    if (!expected.ok() || expected->size() != written.size() ||
        CRYPTO_memcmp(expected->data(), written.data(), written.size()) != 0) {
      continue;
    }
    reusable.emplace(p.user, std::move(*hash));
  }
  return reusable;
}

}  // namespace mesh::model
