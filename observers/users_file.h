// Reads the users file on disk: absent, unreadable, a symbolic link (never followed), or its
// bytes, modification time, mode and owner. Only reads. Thread-safety: free function.
#pragma once

#include <string>

#include "observers/observed.h"

namespace mesh::observers {

ObservedUsersFile ObserveUsersFile(const std::string& path);

}  // namespace mesh::observers
