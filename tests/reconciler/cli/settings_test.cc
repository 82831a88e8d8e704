// Settings (reconciler/cli/settings.h): the same flag from the command line or the environment;
// the users scope, the lease and prune, which plan, reconcile --once, render-users and the
// daemon must all read alike (the chart sets them once, as MESH_RECONCILER_* variables).
#include "reconciler/cli/settings.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

namespace mesh::reconciler {
namespace {

GetEnv FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST_CASE("users scope, lease and prune come from the flags or the environment", "[settings]") {
  auto none = ParseSettings({}, FakeEnv({}));
  REQUIRE(none.ok());
  CHECK(none->users_scope == model::UsersScope::kServer);
  CHECK(none->lease == LeaseMode::kOff);
  CHECK(none->prune == Prune::kNo);

  auto flags = ParseSettings({"--users-scope", "account", "--lease", "--prune"}, FakeEnv({}));
  REQUIRE(flags.ok());
  CHECK(flags->users_scope == model::UsersScope::kAccount);
  CHECK(flags->lease == LeaseMode::kKv);
  CHECK(flags->prune == Prune::kYes);

  auto env = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_USERS_SCOPE", "account"},
                                        {"MESH_RECONCILER_LEASE", "1"},
                                        {"MESH_RECONCILER_PRUNE", "true"}}));
  REQUIRE(env.ok());
  CHECK(env->users_scope == model::UsersScope::kAccount);
  CHECK(env->lease == LeaseMode::kKv);
  CHECK(env->prune == Prune::kYes);

  auto wins = ParseSettings({"--users-scope=server"},
                            FakeEnv({{"MESH_RECONCILER_USERS_SCOPE", "account"}}));
  REQUIRE(wins.ok());
  CHECK(wins->users_scope == model::UsersScope::kServer);
}

// A variable set to the empty string is a value (what a pod spec with a missing value gives),
// not an absence that falls back to the default: the flag says what is wrong with it.
TEST_CASE("An environment variable set to the empty string is read, not taken for unset",
          "[settings]") {
  auto bus = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_BUS", ""}}));
  REQUIRE_FALSE(bus.ok());
  CHECK(bus.status().message().find("MESH_RECONCILER_BUS: --bus: no URL given") !=
        std::string::npos);
  auto records = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_RECORDS", ""}}));
  REQUIRE(records.ok());
  CHECK(records->records_path.empty());
}

// A deletion's confirmation is typed each time: MESH_RECONCILER_YES left in a shell or a pod
// spec must not confirm every later delete-stream.
TEST_CASE("A deletion's --yes comes from the command line only, never the environment",
          "[settings]") {
  auto none = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_YES", "1"}}));
  REQUIRE(none.ok());
  CHECK(none->confirm == Confirm::kNo);
  auto typed = ParseSettings({"--yes"}, FakeEnv({}));
  REQUIRE(typed.ok());
  CHECK(typed->confirm == Confirm::kYes);
  CHECK_FALSE(ParseSettings({"--yes=1"}, FakeEnv({})).ok());
}

// cnats takes a bare HOST:PORT as nats:// and fails on http:// with "no server available";
// either way on-call learns nothing. The refusal says what to give instead.
TEST_CASE("a bus URL names nats:// or tls://, and a wrong one says what to give", "[settings]") {
  for (const char* good :
       {"nats://127.0.0.1:4222", "tls://bus.example:4222", "NATS://h:1", "nats://a:1,tls://b:2"}) {
    INFO(good);
    CHECK(ParseSettings({"--bus", good}, FakeEnv({})).ok());
  }
  auto http = ParseSettings({"--bus", "http://127.0.0.1:8222"}, FakeEnv({}));
  REQUIRE_FALSE(http.ok());
  CHECK(http.status().message().find("give nats://127.0.0.1:8222") != std::string::npos);
  CHECK(http.status().message().find("--monitor") != std::string::npos);
  auto bare = ParseSettings({"--bus", "127.0.0.1:4222"}, FakeEnv({}));
  REQUIRE_FALSE(bare.ok());
  CHECK(bare.status().message().find("give the scheme: nats://127.0.0.1:4222") !=
        std::string::npos);
  auto second = ParseSettings({"--bus", "nats://a:1,b:2"}, FakeEnv({}));
  REQUIRE_FALSE(second.ok());
  CHECK(second.status().message().find("nats://b:2") != std::string::npos);
  auto env = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_BUS", "ws://h:1"}}));
  REQUIRE_FALSE(env.ok());
  CHECK(env.status().message().find("MESH_RECONCILER_BUS") != std::string::npos);
  CHECK(env.status().message().find("nats:// or tls://") != std::string::npos);
}

// Issue 38: any part of an address beyond scheme, host and port may carry a secret. Refused by
// name, the URL never in the message; http(s) keeps a path (http_base_path, a proxy's prefix).
TEST_CASE("Addresses of --bus, --monitor and --remote are scheme://host:port, the rest is named",
          "[settings]") {
  for (const char* bad : {"nats://127.0.0.1:4222;pass=S3CR", "nats://127.0.0.1:4222/S3CR",
                          "nats://127.0.0.1:4222/%3Fpass=S3CR", "nats://u:S3CR@127.0.0.1:4222"}) {
    INFO(bad);
    auto parsed = ParseSettings({"--bus", bad}, FakeEnv({}));
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message().rfind("--bus: ", 0) == 0);
    CHECK(parsed.status().message().find("S3CR") == std::string::npos);
  }
  for (const char* flag : {"--monitor", "--remote"}) {
    INFO(flag);
    for (const char* good : {"http://127.0.0.1:8222", "https://[::1]:9464/", "http://h:1/base/"}) {
      INFO(good);
      CHECK(ParseSettings({flag, good}, FakeEnv({})).ok());
    }
    for (const char* bad : {"http://127.0.0.1:9999/?token=S3CR", "http://127.0.0.1:9999/a;S3CR",
                            "http://u:S3CR@127.0.0.1:9999", "http://127.0.0.1:9999#S3CR",
                            "nats://127.0.0.1:9999", "127.0.0.1:9999"}) {
      INFO(bad);
      auto parsed = ParseSettings({flag, bad}, FakeEnv({}));
      REQUIRE_FALSE(parsed.ok());
      CHECK(parsed.status().message().rfind(std::string(flag) + ": ", 0) == 0);
      CHECK(parsed.status().message().find("S3CR") == std::string::npos);
      CHECK(parsed.status().message().find("127.0.0.1:9999") == std::string::npos);
    }
  }
}

TEST_CASE("the bcrypt cost flag takes a whole number from 4 to 31, nothing around it",
          "[settings]") {
  for (const char* good : {"4", "10", "31"}) {
    auto parsed = ParseSettings({"--bcrypt-cost", good}, FakeEnv({}));
    INFO(good);
    REQUIRE(parsed.ok());
    CHECK(parsed->bcrypt_cost == std::stoi(good));
  }
  for (const char* bad :
       {"3", "32", "", "ten", "10x", "1e1", "+10", " 10", "10 ", "-4", "99999999999999999999"}) {
    auto parsed = ParseSettings({"--bcrypt-cost", bad}, FakeEnv({}));
    INFO("'" << bad << "'");
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message() == "--bcrypt-cost: expected a whole number from 4 to 31");
  }
}

TEST_CASE("an unknown users scope is refused, naming the choices", "[settings]") {
  auto bad = ParseSettings({"--users-scope", "accounts"}, FakeEnv({}));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "--users-scope: server or account");
  auto bad_env = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_USERS_SCOPE", "all"}}));
  REQUIRE_FALSE(bad_env.ok());
  CHECK(bad_env.status().message() ==
        "MESH_RECONCILER_USERS_SCOPE: --users-scope: server or account");
}

TEST_CASE("the listener's connection cap is a whole number from 128 to 16384", "[settings]") {
  auto none = ParseSettings({}, FakeEnv({}));
  REQUIRE(none.ok());
  CHECK(none->http_connections == 256);
  auto flag = ParseSettings({"--http-connections", "1200"}, FakeEnv({}));
  REQUIRE(flag.ok());
  CHECK(flag->http_connections == 1200);
  auto env = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_HTTP_CONNECTIONS", "4096"}}));
  REQUIRE(env.ok());
  CHECK(env->http_connections == 4096);
  for (const char* bad : {"127", "16385", "-1", "1e3", "", "12x"}) {
    INFO(bad);
    auto refused = ParseSettings({"--http-connections", bad}, FakeEnv({}));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("--http-connections") != std::string::npos);
  }
}

TEST_CASE("one client address's connection cap: 8 to 16384, at most the listener's cap",
          "[settings]") {
  auto none = ParseSettings({}, FakeEnv({}));
  REQUIRE(none.ok());
  CHECK(none->http_connections_per_client == 64);
  auto flag = ParseSettings({"--http-connections", "1200", "--http-connections-per-client", "1100"},
                            FakeEnv({}));
  REQUIRE(flag.ok());
  CHECK(flag->http_connections_per_client == 1100);
  auto env = ParseSettings({}, FakeEnv({{"MESH_RECONCILER_HTTP_CONNECTIONS_PER_CLIENT", "200"}}));
  REQUIRE(env.ok());
  CHECK(env->http_connections_per_client == 200);
  for (const char* bad : {"7", "16385", "-1", "", "64k"}) {
    INFO(bad);
    auto refused = ParseSettings({"--http-connections-per-client", bad}, FakeEnv({}));
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("--http-connections-per-client") != std::string::npos);
  }
  // Above the listener's own cap (the default 256 here) it could never be reached.
  auto above = ParseSettings({"--http-connections-per-client", "300"}, FakeEnv({}));
  REQUIRE_FALSE(above.ok());
  CHECK(above.status().message() ==
        "--http-connections-per-client: 300 is more than --http-connections (256)");
}

// Each command accepts its own flags (main.cc's table): another command's flag is refused, and
// its variable in the environment (the sidecar's MESH_RECONCILER_LISTEN) is not read.
TEST_CASE("a command's flags only, from the command line and the environment", "[settings]") {
  const std::vector<std::string> accepted = {"records", "json", "output", "help"};
  auto ok = ParseSettings({"--records", "r.json", "--json"}, FakeEnv({}), accepted);
  REQUIRE(ok.ok());
  CHECK(ok->records_path == "r.json");
  auto other = ParseSettings({"--listen", "127.0.0.1:1"}, FakeEnv({}), accepted);
  REQUIRE_FALSE(other.ok());
  CHECK(other.status().message() == "--listen is not a flag of this command");
  auto env = ParseSettings({},
                           FakeEnv({{"MESH_RECONCILER_LISTEN", "nonsense"},
                                    {"MESH_RECONCILER_RECORDS", "from-env.json"}}),
                           accepted);
  REQUIRE(env.ok());
  CHECK(env->records_path == "from-env.json");
  CHECK(env->listen == "127.0.0.1:9464");
}

// `run --records --bus nats://...` took "--bus" for the records file, and the URL for an
// operand.
TEST_CASE("a flag's value that looks like a flag is refused, --flag=VALUE is not", "[settings]") {
  auto refused = ParseSettings({"--records", "--bus", "nats://127.0.0.1:4222"}, FakeEnv({}));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message().find("--records needs a value (\"--bus\" is a flag") == 0);
  auto reason = ParseSettings({"--reason=-x"}, FakeEnv({}));
  REQUIRE(reason.ok());
  CHECK(reason->reason == "-x");
  auto dash = ParseSettings({"--reason", "-"}, FakeEnv({}));  // a lone "-" is a value
  REQUIRE(dash.ok());
  CHECK(dash->reason == "-");
  auto operands = ParseSettings({"--", "-odd", "--name"}, FakeEnv({}));
  REQUIRE(operands.ok());
  CHECK(operands->positional == std::vector<std::string>{"-odd", "--name"});
  CHECK_FALSE(ParseSettings({"-x"}, FakeEnv({})).ok());
}

TEST_CASE("Output as kubectl and helm take it: -o json, -ojson, -o=json, --output json",
          "[settings]") {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-o", "json"}, {"-ojson"}, {"-o=json"}, {"--output", "json"}, {"--output=json"}}) {
    INFO(args.front());
    auto parsed = ParseSettings(args, FakeEnv({}));
    REQUIRE(parsed.ok());
    CHECK(parsed->format == OutputFormat::kJson);
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-o", "yaml"}, {"-o", "table"}, {"-o"}, {"--output=wide"}}) {
    INFO(args.back());
    CHECK_FALSE(ParseSettings(args, FakeEnv({})).ok());
  }
}

TEST_CASE("every flag has a description, and enumerated flags their words", "[settings]") {
  for (const FlagDescription& flag : DescribeFlags()) {
    INFO(flag.name);
    CHECK_FALSE(flag.help.empty());
    CHECK(flag.metavar.empty() == (flag.arity == FlagArity::kSwitch));
    CHECK(flag.words.empty() == (flag.values != FlagValues::kWords));
    // Each word is a value the parser takes.
    for (const std::string& word : flag.words) {
      CHECK(ParseSettings({"--" + flag.name, word}, FakeEnv({})).ok());
    }
  }
}

}  // namespace
}  // namespace mesh::reconciler
