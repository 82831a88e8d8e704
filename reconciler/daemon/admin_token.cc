#include "reconciler/daemon/admin_token.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string_view>

#include "model/digest.h"
#include "model/thread_safety.h"
#include "observers/regular_file.h"

namespace mesh::reconciler {
namespace {

constexpr size_t kMaxTokenBytes = 4096;
constexpr std::string_view kUtf8ByteOrderMark = "\xEF\xBB\xBF";

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// Whitespace or any other control character: never part of a token.
bool IsBlankOrControl(char c) {
  const auto byte = static_cast<unsigned char>(c);
  return byte <= 0x20 || byte == 0x7f;
}

std::string HowToMakeOne(const std::string& path) {
  return "make one with: openssl rand -hex 32 > " + path;
}

}  // namespace

Result<TokenFile> ReadTokenFile(const std::string& path) {
  // Without blocking: a FIFO in the token's place is refused, not waited on.
  struct stat info {};
  Result<std::string> read =
      observers::ReadRegularFile(path, "--token-file", kMaxTokenBytes, &info);
  if (!read.ok()) return read.status();
  std::string token = std::move(*read);
  if (token.find(kUtf8ByteOrderMark) != std::string::npos) {
    return Status(Errc::kInvalidArgument,
                  "--token-file: " + path +
                      " holds a UTF-8 byte order mark (an editor's \"UTF-8 with BOM\"): refused, "
                      "as other readers of the file would send it; save the file without it "
                      "(e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' " +
                      path + ") or " + HowToMakeOne(path));
  }
  while (!token.empty() && IsSpace(token.back())) token.pop_back();
  size_t first = 0;
  while (first < token.size() && IsSpace(token[first])) ++first;
  token.erase(0, first);
  if (token.empty()) {
    return Status(Errc::kInvalidArgument,
                  "--token-file: " + path + " is empty: it holds no token; " + HowToMakeOne(path));
  }
  TokenFile file;
  file.token = std::move(token);
  if ((info.st_mode & S_IROTH) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
    file.warning = "--token-file " + path + " is readable by others (mode " + mode +
                   "): any local user can read the admin token; chmod o-r " + path +
                   " (0600, or 0440 for a group)";
  }
  return file;
}

Status CheckTokenStrength(const std::string& token, const std::string& path) {
  const char* weakness = nullptr;
  std::set<char> distinct(token.begin(), token.end());
  if (token.size() < kMinTokenChars) {
    weakness = "is too short";
  } else if (std::any_of(token.begin(), token.end(), IsBlankOrControl)) {
    weakness = "has whitespace or a control character inside";
  } else if (distinct.size() < kMinDistinctTokenChars) {
    weakness = "has too few different characters";
  }
  if (weakness == nullptr) return Status::Ok();
  // Never the token, nor its length: only which rule it breaks.
  return Status(Errc::kInvalidArgument,
                "--token-file: " + path + ": the token " + weakness + " (a token needs at least " +
                    std::to_string(kMinTokenChars) + " characters, none of them whitespace, " +
                    "at least " + std::to_string(kMinDistinctTokenChars) + " of them different); " +
                    HowToMakeOne(path));
}

Status AdminToken::Reload() {
  if (path_.empty()) return Status::Ok();
  Result<TokenFile> file = ReadTokenFile(path_);
  const Status strong = file.ok() ? CheckTokenStrength(file->token, path_) : file.status();
  MutexLock lock(mutex_);
  if (!strong.ok()) {
    digest_.reset();
    warning_.reset();
    return strong;
  }
  digest_ = model::Sha256(file->token);
  warning_ = file->warning;
  return Status::Ok();
}

std::optional<std::string> AdminToken::warning() const {
  MutexLock lock(mutex_);
  return warning_;
}

std::optional<std::string> AdminToken::digest() const {
  MutexLock lock(mutex_);
  return digest_;
}

}  // namespace mesh::reconciler
