// The admin token that guards the daemon's POST endpoints, read from --token-file. Only its
// SHA-256 digest is kept in memory after loading (the handler compares digests in constant
// time); the file is re-read when it changes (the daemon's file watcher calls Reload).
//
// Thread-safety: AdminToken may be used from any thread (the digest is guarded by a mutex).
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "model/result.h"
#include "model/thread_safety.h"

namespace mesh::reconciler {

// The token in `path`, surrounding whitespace and the trailing newline stripped. An error
// (naming the file, never its content) when it cannot be read or holds no token.
Result<std::string> ReadTokenFile(const std::string& path);

// The daemon accepts only a token that is hard to guess: at least kMinTokenChars characters
// (after the surrounding whitespace is stripped), no whitespace or control character inside,
// and at least kMinDistinctTokenChars different characters (so not one character repeated, nor
// a short pattern). `openssl rand -hex 32` (64 characters) and the chart's generated token (40
// random letters and digits) pass. The error names `path` and the rule broken, never the token
// (nor its length), and says how to make a good one.
inline constexpr size_t kMinTokenChars = 32;
inline constexpr size_t kMinDistinctTokenChars = 8;
Status CheckTokenStrength(const std::string& token, const std::string& path);

class AdminToken {
 public:
  // An empty path: no token is configured, and never will be.
  explicit AdminToken(std::string path) : path_(std::move(path)) {}

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Re-reads the file. On failure (unreadable, not a regular file, empty, or a weak token: see
  // CheckTokenStrength) no token is configured any more (fail closed: POSTs are refused until
  // the file holds a good token again) and the error is returned.
  Status Reload();
  // SHA-256 of the token (32 raw bytes); nullopt when none is loaded.
  std::optional<std::string> digest() const;

 private:
  const std::string path_;
  mutable Mutex mutex_;
  std::optional<std::string> digest_ GUARDED_BY(mutex_);
};

}  // namespace mesh::reconciler
