#include "observers/users_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "observers/unique_fd.h"

namespace mesh::observers {
namespace {

ObservedUsersFile Unreadable(const std::string& path, const char* what, const char* reason) {
  ObservedUsersFile file;
  file.state = ObservedUsersFile::State::kUnreadable;
  file.error = std::string(what) + " " + path + ": " + reason;
  return file;
}

}  // namespace

ObservedUsersFile ObserveUsersFile(const std::string& path) {
  ObservedUsersFile file;
  // O_NONBLOCK: a FIFO in the file's place must not hang the observer. O_NOFOLLOW: a symbolic
  // link is reported, never read through (ELOOP).
  UniqueFd fd(new int(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)));
  if (*fd < 0) {
    if (errno == ENOENT) return file;  // kAbsent: data, not an error
    if (errno == ELOOP) {
      file.state = ObservedUsersFile::State::kPresent;
      file.kind = ObservedUsersFile::Kind::kSymlink;
      return file;
    }
    return Unreadable(path, "open", std::strerror(errno));
  }
  // fstat on the open descriptor: the bytes and the time describe the same file even while it
  // is being replaced (rename) next to us.
  struct stat info {};
  if (fstat(*fd, &info) != 0) return Unreadable(path, "stat", std::strerror(errno));
  if (!S_ISREG(info.st_mode)) return Unreadable(path, "read", "not a regular file");
  std::string bytes;
  bytes.reserve(static_cast<size_t>(info.st_size));
  char buffer[8192];
  while (true) {
    const ssize_t n = read(*fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Unreadable(path, "read", std::strerror(errno));
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  file.state = ObservedUsersFile::State::kPresent;
  file.bytes = std::move(bytes);
  file.mtime_unix_ns =
      static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  file.mode = static_cast<uint32_t>(info.st_mode & 07777);
  file.owner_uid = static_cast<int64_t>(info.st_uid);
  return file;
}

}  // namespace mesh::observers
