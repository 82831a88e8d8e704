// The admin token file as the daemon and the on-call CLI read it (issue 38): a UTF-8 byte order
// mark is refused, a file readable by others is used with a warning.
#include "reconciler/daemon/admin_token.h"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "tests/support/nats_server.h"

namespace mesh::reconciler {
namespace {

constexpr char kGoodToken[] = "admin-token-test-3b9e0f2c7a5d18e4c6";

std::string TokenFileWith(const std::string& dir, const std::string& bytes, mode_t mode) {
  const std::string path = dir + "/token";
  mesh::testing::WriteFile(path, bytes);
  REQUIRE(chmod(path.c_str(), mode) == 0);
  return path;
}

TEST_CASE("A token file with a UTF-8 byte order mark is refused, saying what to fix", "[daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-token-bom");
  for (const std::string& bytes : {"\xEF\xBB\xBF" + std::string(kGoodToken) + "\n",
                                   "\n\xEF\xBB\xBF" + std::string(kGoodToken)}) {
    const std::string path = TokenFileWith(dir, bytes, 0600);
    Result<TokenFile> read = ReadTokenFile(path);
    REQUIRE_FALSE(read.ok());
    const std::string message = read.status().message();
    INFO(message);
    CHECK(message.find("byte order mark") != std::string::npos);
    CHECK(message.find(path) != std::string::npos);
    CHECK(message.find(kGoodToken) == std::string::npos);
    AdminToken token(path);
    CHECK_FALSE(token.Reload().ok());
    CHECK_FALSE(token.digest());
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("A token file readable by others is used, with a warning, group-readable is not",
          "[daemon]") {
  const std::string dir = mesh::testing::MakeTempDir("mesh-token-mode");
  const std::string token = std::string(kGoodToken) + "\n";
  for (mode_t mode : {0644, 0604, 0666}) {
    INFO("mode " << std::oct << mode);
    const std::string path = TokenFileWith(dir, token, mode);
    Result<TokenFile> read = ReadTokenFile(path);
    REQUIRE(read.ok());
    CHECK(read->token == kGoodToken);
    REQUIRE(read->warning);
    CHECK(read->warning->find("readable by others") != std::string::npos);
    CHECK(read->warning->find("chmod o-r " + path) != std::string::npos);
    CHECK(read->warning->find(kGoodToken) == std::string::npos);
    AdminToken admin(path);
    REQUIRE(admin.Reload().ok());
    CHECK(admin.digest());
    REQUIRE(admin.warning());
    CHECK(*admin.warning() == *read->warning);
  }
  const std::string path = TokenFileWith(dir, token, 0644);
  CHECK(ReadTokenFile(path)->warning->find("(mode 0644)") != std::string::npos);
  for (mode_t mode : {0600, 0400, 0640, 0440}) {
    INFO("mode " << std::oct << mode);
    TokenFileWith(dir, token, mode);
    Result<TokenFile> read = ReadTokenFile(path);
    REQUIRE(read.ok());
    CHECK_FALSE(read->warning);
    AdminToken admin(path);
    REQUIRE(admin.Reload().ok());
    CHECK_FALSE(admin.warning());
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mesh::reconciler
