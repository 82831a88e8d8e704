#include "observers/url.h"

#include <catch2/catch.hpp>
#include <vector>

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

TEST_CASE("A query string or fragment is suspect: found, and cut from messages", "[observers]") {
  for (const char* url : {"nats://host:4222/?user=u&pass=S", "nats://host:4222?token=S",
                          "nats://host/?nkey=S", "nats://host/?jwt=S", "nats://host/?password=S",
                          "nats://host:4222/?x=1", "nats://host:4222#S", "host:4222?pass=S"}) {
    INFO(url);
    CHECK(HasQueryOrFragment(url));
    CHECK(UrlForMessages(url).find('S') == std::string::npos);
    CHECK_FALSE(ParseServerAddress(url));
  }
  CHECK_FALSE(HasQueryOrFragment("nats://host:4222"));
  CHECK_FALSE(HasQueryOrFragment("nats://host:4222/"));
  CHECK(UrlForMessages("nats://u:p@host:4222/?pass=S") == "nats://host:4222");
  CHECK(UrlForMessages("nats://host:4222") == "nats://host:4222");
}

TEST_CASE("Messages carry scheme, host and port only: no path, no parameters after a semicolon",
          "[observers]") {
  CHECK(UrlForMessages("nats://127.0.0.1:4222;pass=S") == "nats://127.0.0.1:4222");
  CHECK(UrlForMessages("nats://127.0.0.1:4222/S") == "nats://127.0.0.1:4222");
  CHECK(UrlForMessages("nats://127.0.0.1:4222/%3Fpass=S") == "nats://127.0.0.1:4222");
  CHECK(UrlForMessages("http://u:p@[::1]:9464/base/S?token=S#S") == "http://[::1]:9464");
  CHECK(UrlForMessages("127.0.0.1:4222/S") == "127.0.0.1:4222");
}

TEST_CASE("An address is scheme://host:port: every other part is named, never quoted",
          "[observers]") {
  struct Case {
    const char* url;
    UrlPath path;
    const char* part;
  };
  const std::vector<Case> refused = {
      {"nats://127.0.0.1:4222;pass=S", UrlPath::kRefused, "parameters after ';'"},
      {"nats://127.0.0.1:4222/S", UrlPath::kRefused, "a path"},
      {"nats://127.0.0.1:4222/%3Fpass=S", UrlPath::kRefused, "a path"},
      {"nats://127.0.0.1:4222/?pass=S", UrlPath::kRefused, "a query string"},
      {"nats://127.0.0.1:4222#S", UrlPath::kRefused, "a fragment"},
      {"nats://u:S@127.0.0.1:4222", UrlPath::kRefused, "userinfo"},
      {"nats://S@127.0.0.1:4222", UrlPath::kRefused, "userinfo"},
      {"nats://127.0.0.1%3BS:4222", UrlPath::kRefused, "percent-encoding in the host or port"},
      {"nats://127.0.0.1:42S", UrlPath::kRefused, "a port that is not a number from 0 to 65535"},
      {"nats://host,S:4222", UrlPath::kRefused, "a host that is not a plain name or IP address"},
      {"nats://127.0.0.1:4222 S", UrlPath::kRefused, "a control character or space"},
      {"http://127.0.0.1:9464/?token=S", UrlPath::kAllowed, "a query string"},
      {"http://127.0.0.1:9464/base;S", UrlPath::kAllowed, "parameters after ';'"},
      {"http://u:S@127.0.0.1:9464", UrlPath::kAllowed, "userinfo"},
      {"https://127.0.0.1:9464/#S", UrlPath::kAllowed, "a fragment"},
  };
  for (const Case& c : refused) {
    INFO(c.url);
    const std::optional<std::string> part = RefusedUrlPart(c.url, c.path);
    REQUIRE(part);
    CHECK(*part == c.part);
    CHECK(part->find('S') == std::string::npos);
  }
  for (const char* plain : {"nats://127.0.0.1:4222", "nats://127.0.0.1:4222/", "tls://bus.example",
                            "nats://[::1]:4222", "127.0.0.1:4222", "nats://nats-0.nats_svc:4222"}) {
    INFO(plain);
    CHECK_FALSE(RefusedUrlPart(plain, UrlPath::kRefused));
  }
  CHECK_FALSE(RefusedUrlPart("http://127.0.0.1:8222/nats/", UrlPath::kAllowed));
  CHECK_FALSE(RefusedUrlPart("https://[::1]:9464", UrlPath::kAllowed));
  CHECK(RefusedUrlPart("http://127.0.0.1:8222/nats/", UrlPath::kRefused) == "a path");
}

TEST_CASE("ParseServerAddress reads host and port, drops credentials", "[observers]") {
  auto a = ParseServerAddress("nats://user:secret@bus.example:4333");
  REQUIRE(a);
  CHECK(a->host == "bus.example");
  CHECK(a->port == "4333");
  CHECK(a->url == "nats://bus.example:4333");
  a = ParseServerAddress("tls://127.0.0.1");
  REQUIRE(a);
  CHECK(a->port == "4222");
  CHECK(a->url == "tls://127.0.0.1:4222");
  a = ParseServerAddress("[::1]:5000");
  REQUIRE(a);
  CHECK(a->host == "::1");
  CHECK(a->url == "nats://[::1]:5000");
  CHECK_FALSE(ParseServerAddress("nats://:4222"));
  CHECK_FALSE(ParseServerAddress("nats://host:42x2"));
  CHECK_FALSE(ParseServerAddress("nats://host:65536"));
  CHECK_FALSE(ParseServerAddress("nats://host:000004222"));
  CHECK(ParseServerAddress("nats://host:65535"));
  CHECK_FALSE(ParseServerAddress("nats://[::1"));
  CHECK_FALSE(ParseServerAddress("::1:4222"));
  CHECK_FALSE(ParseServerAddress(""));
}

TEST_CASE("SplitHostPort: one authority rule for bus, monitoring and --listen", "[observers]") {
  auto split = SplitHostPort("host:80");
  REQUIRE(split);
  CHECK(split->host == "host");
  CHECK(split->port == "80");
  split = SplitHostPort("[::1]");
  REQUIRE(split);
  CHECK(split->host == "::1");
  CHECK_FALSE(split->port);
  split = SplitHostPort("host:");
  REQUIRE(split);
  CHECK(split->port == "");
  split = SplitHostPort(":9464");
  REQUIRE(split);
  CHECK(split->host.empty());
  CHECK_FALSE(SplitHostPort("::1:80"));  // IPv6 without brackets
  CHECK_FALSE(SplitHostPort("[::1]80"));
  CHECK_FALSE(SplitHostPort("[::1"));
  CHECK(JoinHostPort("::1", "80") == "[::1]:80");
  CHECK(JoinHostPort("host", "80") == "host:80");
  CHECK(ParsePort("0") == 0);
  CHECK(ParsePort("65535") == 65535);
  CHECK_FALSE(ParsePort(""));
  CHECK_FALSE(ParsePort("65536"));
  CHECK_FALSE(ParsePort("8x"));
}

}  // namespace
}  // namespace mesh::observers
