#include "observers/url.h"

#include <catch2/catch.hpp>

namespace mesh::observers {
namespace {

TEST_CASE("StripUserInfo removes credentials and nothing else", "[observers]") {
  CHECK(StripUserInfo("nats://user:pass@host:4222") == "nats://host:4222");
  CHECK(StripUserInfo("nats://token@host:4222") == "nats://host:4222");
  CHECK(StripUserInfo("http://u:p@127.0.0.1:8222/varz") == "http://127.0.0.1:8222/varz");
  CHECK(StripUserInfo("http://u:p@w@host/a@b") == "http://host/a@b");  // '@' in the path stays
  CHECK(StripUserInfo("nats://host:4222") == "nats://host:4222");
  CHECK(StripUserInfo("http://host/path?x=a@b") == "http://host/path?x=a@b");
  CHECK(StripUserInfo("user:pass@host:4222") == "host:4222");
  CHECK(StripUserInfo("") == "");
}

}  // namespace
}  // namespace mesh::observers
