#include "reconciler/admin_token.h"

#include "model/digest.h"
#include "observers/regular_file.h"

namespace mesh::reconciler {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
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
  if (token.empty()) return Status(Errc::kInvalidArgument, "--token-file: " + path + " is empty");
  return token;
}

Status AdminToken::Reload() {
  if (path_.empty()) return Status::Ok();
  Result<std::string> token = ReadTokenFile(path_);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!token.ok()) {
    digest_.reset();
    return token.status();
  }
  digest_ = model::Sha256(*token);
  return Status::Ok();
}

std::optional<std::string> AdminToken::digest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return digest_;
}

}  // namespace mesh::reconciler
