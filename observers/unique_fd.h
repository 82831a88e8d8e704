// A POSIX file descriptor owned like any other handle: closed when the owner goes away.
//
// Thread-safety: a value; not shared.
#pragma once

#include <unistd.h>

#include <memory>

namespace mesh::observers {

struct FdCloser {
  void operator()(const int* fd) const {
    if (*fd >= 0) close(*fd);
    delete fd;
  }
};
// Holds the result of open()/socket(), which may be -1: check *fd before use.
using UniqueFd = std::unique_ptr<int, FdCloser>;

}  // namespace mesh::observers
