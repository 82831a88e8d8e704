// The users-file observer: absent, unreadable (with the reason, never the content) or present
// with its bytes and modification time.
#include "observers/users_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/support/nats_server.h"

namespace mesh::observers {
namespace {

using State = ObservedUsersFile::State;

struct TempDir {
  std::string path = testing::MakeTempDir("mesh-users-file");
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST_CASE("A missing users file is absent, not an error", "[observers]") {
  TempDir dir;
  ObservedUsersFile file = ObserveUsersFile(dir.path + "/users.conf");
  CHECK(file.state == State::kAbsent);
  CHECK(file.bytes.empty());
  CHECK(file.error.empty());
}

TEST_CASE("A present users file gives its bytes and modification time", "[observers]") {
  TempDir dir;
  const std::string path = dir.path + "/users.conf";
  const std::string bytes = std::string("accounts {\n  MESH { }\n}\n") + std::string(20000, '#');
  testing::WriteFile(path, bytes);
  struct stat info {};
  REQUIRE(stat(path.c_str(), &info) == 0);
  ObservedUsersFile file = ObserveUsersFile(path);
  CHECK(file.state == State::kPresent);
  CHECK(file.bytes == bytes);
  CHECK(file.mtime_unix_ns ==
        static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec);

  testing::WriteFile(path, "");
  ObservedUsersFile empty = ObserveUsersFile(path);
  CHECK(empty.state == State::kPresent);
  CHECK(empty.bytes.empty());
}

TEST_CASE("The users file's mode and owner are observed, and a symlink is never followed",
          "[observers]") {
  TempDir dir;
  const std::string path = dir.path + "/users.conf";
  testing::WriteFile(path, "password: secret-content");
  REQUIRE(chmod(path.c_str(), 0640) == 0);
  ObservedUsersFile file = ObserveUsersFile(path);
  CHECK(file.state == State::kPresent);
  CHECK(file.kind == ObservedUsersFile::Kind::kRegularFile);
  CHECK(file.mode == 0640);
  CHECK(file.owner_uid == static_cast<int64_t>(geteuid()));

  const std::string elsewhere = dir.path + "/elsewhere.conf";
  testing::WriteFile(elsewhere, "password: secret-content");
  std::filesystem::remove(path);
  REQUIRE(symlink(elsewhere.c_str(), path.c_str()) == 0);
  ObservedUsersFile link = ObserveUsersFile(path);
  CHECK(link.state == State::kPresent);
  CHECK(link.kind == ObservedUsersFile::Kind::kSymlink);
  CHECK(link.bytes.empty());  // not read through the link

  std::filesystem::remove(path);
  REQUIRE(symlink((dir.path + "/dangling").c_str(), path.c_str()) == 0);
  CHECK(ObserveUsersFile(path).kind == ObservedUsersFile::Kind::kSymlink);
}

TEST_CASE("An unreadable users file says why without its content", "[observers]") {
  TempDir dir;
  SECTION("a directory in its place") {
    const std::string path = dir.path + "/users.conf";
    std::filesystem::create_directory(path);
    ObservedUsersFile file = ObserveUsersFile(path);
    CHECK(file.state == State::kUnreadable);
    CHECK(file.error.find(path) != std::string::npos);
    CHECK(file.error.find("not a regular file") != std::string::npos);
  }
  SECTION("a FIFO in its place does not block") {
    const std::string path = dir.path + "/users.conf";
    REQUIRE(mkfifo(path.c_str(), 0600) == 0);
    ObservedUsersFile file = ObserveUsersFile(path);
    CHECK(file.state == State::kUnreadable);
  }
  SECTION("a path through a file") {
    testing::WriteFile(dir.path + "/plain", "password: secret-content");
    const std::string path = dir.path + "/plain/users.conf";
    ObservedUsersFile file = ObserveUsersFile(path);
    CHECK(file.state == State::kUnreadable);
    CHECK(file.error.find("Not a directory") != std::string::npos);
    CHECK(file.error.find("secret-content") == std::string::npos);
  }
  SECTION("no read permission") {
    if (geteuid() == 0) {
      SUCCEED("root reads any file: permission bits cannot make it unreadable");
      return;
    }
    const std::string path = dir.path + "/users.conf";
    testing::WriteFile(path, "password: secret-content");
    REQUIRE(chmod(path.c_str(), 0) == 0);
    ObservedUsersFile file = ObserveUsersFile(path);
    CHECK(file.state == State::kUnreadable);
    CHECK(file.error.find("Permission denied") != std::string::npos);
    CHECK(file.error.find("secret-content") == std::string::npos);
    CHECK(file.bytes.empty());
  }
}

}  // namespace
}  // namespace mesh::observers
