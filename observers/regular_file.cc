#include "observers/regular_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mesh::observers {

Result<OpenedFile> OpenRegularFile(const std::string& path, const std::string& what, bool* absent) {
  if (absent != nullptr) *absent = false;
  OpenedFile file;
  file.fd.reset(new int(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)));
  if (*file.fd < 0) {
    const int error = errno;
    if (absent != nullptr && error == ENOENT) *absent = true;
    return Status(Errc::kIo, "cannot read " + what + " " + path + ": " + std::strerror(error));
  }
  if (fstat(*file.fd, &file.info) != 0) {
    return Status(Errc::kIo, "cannot stat " + what + " " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(file.info.st_mode)) {
    return Status(Errc::kIo, what + " " + path + " is not a regular file");
  }
  return file;
}

Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                    size_t max_bytes, struct stat* info) {
  Result<OpenedFile> file = OpenRegularFile(path, what);
  if (!file.ok()) return file.status();
  if (info != nullptr) *info = file->info;
  if (static_cast<size_t>(file->info.st_size) > max_bytes) {
    return Status(Errc::kInvalidArgument,
                  what + " " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  std::string bytes;
  char buffer[4096];
  while (true) {
    const ssize_t n = read(*file->fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return Status(Errc::kIo, "cannot read " + what + " " + path + ": " + std::strerror(errno));
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) {
      return Status(Errc::kInvalidArgument,
                    what + " " + path + " is larger than " + std::to_string(max_bytes) + " bytes");
    }
  }
  return bytes;
}

}  // namespace mesh::observers
