#include "reconciler/admin_token.h"

#include <fstream>
#include <sstream>

#include "model/digest.h"

namespace mesh::reconciler {
namespace {

constexpr size_t kMaxTokenBytes = 4096;

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

}  // namespace

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Errc::kIo, "--token-file: cannot read " + path);
  std::ostringstream all;
  all << in.rdbuf();
  std::string token = all.str();
  if (token.size() > kMaxTokenBytes) {
    return Status(Errc::kInvalidArgument, "--token-file: " + path + " is too large for a token");
  }
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
