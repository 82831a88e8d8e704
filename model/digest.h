// SHA-256 helpers shared by the model (the hash cache key, the users file's fingerprint).
// Pure; thread-safe free functions.
#pragma once

#include <string>
#include <string_view>

namespace mesh::model {

// The 32-byte SHA-256 digest of `data` (raw bytes).
std::string Sha256(std::string_view data);
// The digest as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view data);

}  // namespace mesh::model
