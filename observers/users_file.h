// Reads the users file on disk: absent, unreadable, or its bytes and modification time.
// Only reads. Thread-safety: free function.
#pragma once

#include <string>

#include "observers/observed.h"

namespace mesh::observers {

ObservedUsersFile ObserveUsersFile(const std::string& path);

}  // namespace mesh::observers
