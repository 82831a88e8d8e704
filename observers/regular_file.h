// Opening and reading the local files the reconciler is given (records, users file, token,
// password, pid file) without ever blocking on them: a FIFO, a device or a socket in a file's
// place is refused, never waited on.
//
// Thread-safety: free functions.
#pragma once

#include <sys/stat.h>

#include <cstddef>
#include <string>

#include "model/result.h"
#include "observers/unique_fd.h"

namespace mesh::observers {

// An open regular file and what fstat said about it on that descriptor.
struct OpenedFile {
  UniqueFd fd;
  struct stat info {};
};

// Opens `path` read-only with O_NONBLOCK (so that open() of a FIFO returns at once instead of
// waiting for a writer), then refuses anything that fstat does not call a regular file.
// Errors name `what` and the path, never the content; a missing file is Errc::kIo with the
// errno text ("No such file or directory"), and `absent` (when given) is set to true for it.
Result<OpenedFile> OpenRegularFile(const std::string& path, const std::string& what,
                                   bool* absent = nullptr);

// The whole content of the regular file `path`, refused when it is larger than `max_bytes`.
// `info`, when given, receives what fstat said about the file read (its mode, its owner).
Result<std::string> ReadRegularFile(const std::string& path, const std::string& what,
                                    size_t max_bytes, struct stat* info = nullptr);

}  // namespace mesh::observers
