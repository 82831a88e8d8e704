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

namespace mesh::reconciler {

// The token in `path`, surrounding whitespace and the trailing newline stripped. An error
// (naming the file, never its content) when it cannot be read or holds no token.
Result<std::string> ReadTokenFile(const std::string& path);

class AdminToken {
 public:
  // An empty path: no token is configured, and never will be.
  explicit AdminToken(std::string path) : path_(std::move(path)) {}

  bool enabled() const { return !path_.empty(); }
  const std::string& path() const { return path_; }

  // Re-reads the file. On failure no token is configured any more (fail closed: POSTs are
  // refused until the file is readable again) and the error is returned.
  Status Reload();
  // SHA-256 of the token (32 raw bytes); nullopt when none is loaded.
  std::optional<std::string> digest() const;

 private:
  const std::string path_;
  mutable std::mutex mutex_;
  std::optional<std::string> digest_;
};

}  // namespace mesh::reconciler
