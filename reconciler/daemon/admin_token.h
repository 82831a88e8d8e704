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

// A token file as read: the token, and a warning when the file's mode lets others read it.
struct TokenFile {
  std::string token;
  // Set when the file is readable by others (mode o+r, e.g. 0644): the token is still used (a
  // refusal would turn the daemon's POSTs off, or the on-call CLI away, over a mode), but the
  // file should be fixed; like ssh's "permissions are too open", the text names the file, its
  // mode and the chmod, never the token. Group-readable is not warned about: the chart mounts
  // the token 0440 for the pod's fsGroup on purpose.
  std::optional<std::string> warning;
};

// The token in `path`, surrounding whitespace and the trailing newline stripped. An error
// (naming the file, never its content) when it cannot be read or holds no token, or when it
// holds a UTF-8 byte order mark (an editor's "UTF-8 with BOM"): refused rather than stripped,
// because other readers of the same file (curl -H "Authorization: Bearer $(cat FILE)", a script
// reading the Secret) would send the mark's three bytes and be refused with 401 while this
// binary worked; a refusal saying what to fix makes the file right for every reader. The daemon
// and the CLI read the file here, so both apply the same rules.
Result<TokenFile> ReadTokenFile(const std::string& path);

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
  // The loaded file's warning (TokenFile::warning), for the caller to log after each Reload.
  std::optional<std::string> warning() const;

 private:
  const std::string path_;
  mutable Mutex mutex_;
  std::optional<std::string> digest_ GUARDED_BY(mutex_);
  std::optional<std::string> warning_ GUARDED_BY(mutex_);
};

}  // namespace mesh::reconciler
