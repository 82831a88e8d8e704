// Test support: a temporary folder (MakeTempDir) that is removed, with everything in it, when
// the object goes out of scope.
//
// Header-only. Thread-safety: one test thread owns a TempDir.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

#include "tests/support/nats_server.h"

namespace mesh::testing {

struct TempDir {
  explicit TempDir(const std::string& prefix) : path(MakeTempDir(prefix)) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }

  const std::string path;
};

}  // namespace mesh::testing
