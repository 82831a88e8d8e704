#include "reconciler/daemon/admin_token.h"

#include <algorithm>
#include <set>

#include "model/digest.h"
#include "model/thread_safety.h"
#include "observers/regular_file.h"

namespace mesh::reconciler {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

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

Result<std::string> ReadTokenFile(const std::string& path) {
  // Without blocking: a FIFO in the token's place is refused, not waited on.
  Result<std::string> read = observers::ReadRegularFile(path, "--token-file", kMaxTokenBytes);
  if (!read.ok()) return read.status();
  std::string token = std::move(*read);
  while (!token.empty() && IsSpace(token.back())) token.pop_back();
  size_t first = 0;
  while (first < token.size() && IsSpace(token[first])) ++first;
  token.erase(0, first);
  if (token.empty()) {
    return Status(Errc::kInvalidArgument,
                  "--token-file: " + path + " is empty: it holds no token; " + HowToMakeOne(path));
  }
  return token;
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
  Result<std::string> token = ReadTokenFile(path_);
  const Status strong = token.ok() ? CheckTokenStrength(*token, path_) : token.status();
  MutexLock lock(mutex_);
  if (!strong.ok()) {
    digest_.reset();
    return strong;
  }
  digest_ = model::Sha256(*token);
  return Status::Ok();
}

std::optional<std::string> AdminToken::digest() const {
  MutexLock lock(mutex_);
  return digest_;
}

}  // namespace mesh::reconciler
