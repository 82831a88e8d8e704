#include "reconciler/records_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace mesh::reconciler {

Result<model::ParseOutcome> LoadRecords(const std::string& path,
                                        const std::string& reconciler_user) {
  if (path.empty()) return Status(Errc::kInvalidArgument, "no records file given (--records)");
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(Errc::kIo, "cannot open records " + path + ": " + std::strerror(errno));
  }
  std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status(Errc::kIo, "records " + path + " is not a regular file");
  }
  if (static_cast<size_t>(st.st_size) > model::kMaxRecordsBytes) {
    model::ParseOutcome outcome;
    outcome.errors.push_back({"$", "the file is " + std::to_string(st.st_size) +
                                       " bytes, more than the limit of " +
                                       std::to_string(model::kMaxRecordsBytes)});
    return outcome;
  }
  std::string bytes;
  bytes.resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(Errc::kIo, "cannot read records " + path + ": " + std::strerror(errno));
    if (n == 0) break;  // truncated while we read: parse what the size said, no more
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);
  // Written in place while we read (not replaced by rename): never act on half a file.
  struct stat after {};
  if (::fstat(fd, &after) != 0 || after.st_size != st.st_size ||
      after.st_mtim.tv_sec != st.st_mtim.tv_sec || after.st_mtim.tv_nsec != st.st_mtim.tv_nsec ||
      got != static_cast<size_t>(st.st_size)) {
    return Status(Errc::kUnavailable, "records " + path + " changed while being read");
  }
  model::ParseOptions options;
  options.reconciler_user = reconciler_user;
  return model::ParseRecords(bytes, options);
}

}  // namespace mesh::reconciler
