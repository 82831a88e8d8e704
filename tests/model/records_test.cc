// ParseRecords / IsValidName (model/records.h): the example parses into the expected structure;
// every validation rule of the contract's section 1 is refused with its JSON path; errors come
// all at once in document order; hostile input (huge, deep, empty, random) is refused cleanly.
#include "model/records.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tests/support/nats_server.h"

namespace mesh::model {
namespace {

using Kind = Credential::Kind;

// A valid document with a controller holding the only credential, plus `rest` (members).
std::string Doc(const std::string& rest = "") {
  return R"({"version":1,"mesh":"m","controller":{"user":"ctl","password":"pw"})" +
         (rest.empty() ? "" : "," + rest) + "}";
}

// A valid document whose controller is `controller` (an object's members), plus `rest`.
std::string DocWithController(const std::string& controller, const std::string& rest = "") {
  return R"({"version":1,"mesh":"m","controller":{)" + controller + "}" +
         (rest.empty() ? "" : "," + rest) + "}";
}

// A module "mod" with seat "s" (accepts k, emits e) and a role "mesh-r" (accepts w, emits done)
// held by node "n"; `seat` and `role` add members to the seat and the role.
std::string Mesh(const std::string& seat = "", const std::string& role = "") {
  return R"("nodes":[{"name":"n"}],"modules":[{"name":"mod","seats":[{"name":"s","accepts":["k"],"emits":["e"])" +
         (seat.empty() ? "" : "," + seat) +
         R"(}]}],"roles":[{"name":"mesh-r","accepts":["w"],"emits":["done"],"holders":["n"])" +
         (role.empty() ? "" : "," + role) + "}]";
}

std::string Example() {
  return mesh::testing::ReadFile(std::string(MESH_SOURCE_DIR) + "/examples/records.json");
}

std::string Describe(const ParseOutcome& outcome) {
  std::string text;
  for (const ValidationError& e : outcome.errors) text += "  " + e.ToString() + "\n";
  return text;
}

TEST_CASE("the example records parse into the expected structure", "[records]") {
  const ParseOutcome outcome = ParseRecords(Example());
  INFO(Describe(outcome));
  REQUIRE(outcome.ok());
  const Records& r = outcome.records;
  CHECK(r.version == 1);
  CHECK(r.mesh == "demo");
  CHECK(r.bus.account == "MESH");
  CHECK(r.bus.replicas == 1);
  CHECK(r.bus.events_max_age_seconds == 604800);

  CHECK(r.controller.user == "mesh-controller");
  CHECK(r.controller.credential.kind == Kind::kPlain);
  CHECK(r.controller.credential.secret.starts_with("demo-only-"));
  CHECK(r.controller.submits_to == std::vector<std::string>{"mesh-build", "intake"});
  CHECK(r.controller.follows ==
        std::vector<FollowRef>{{"invoicer", "invoiced"}, {"mesh-build", "built"}});

  REQUIRE(r.nodes.size() == 3);
  CHECK(r.nodes[0].name == "node-a");
  CHECK(r.nodes[0].credential.kind == Kind::kPlain);
  CHECK(r.nodes[1].name == "node-b");
  CHECK(r.nodes[1].credential.kind == Kind::kBcrypt);
  CHECK(r.nodes[1].credential.secret.starts_with("$2b$10$"));
  CHECK(r.nodes[2].name == "node-c");
  CHECK(r.nodes[2].credential.kind == Kind::kNone);
  CHECK(r.nodes[2].credential.secret.empty());

  REQUIRE(r.modules.size() == 2);
  const Module& billing = r.modules[0];
  CHECK(billing.name == "billing");
  REQUIRE(billing.seats.size() == 2);
  CHECK(billing.seats[0].name == "invoicer");
  CHECK(billing.seats[0].accepts == std::vector<std::string>{"render", "void"});
  CHECK(billing.seats[0].emits == std::vector<std::string>{"invoiced", "voided"});
  CHECK(billing.seats[0].uses == std::vector<std::string>{"mesh-build", "ledger"});
  CHECK(billing.seats[1].uses.empty());
  CHECK(billing.follows == std::vector<FollowRef>{{"mesh-build", "built"}});
  CHECK(r.modules[1].name == "shop");
  CHECK(r.modules[1].follows ==
        std::vector<FollowRef>{{"invoicer", "invoiced"}, {"ledger", "posted"}});

  REQUIRE(r.roles.size() == 3);
  CHECK(r.roles[0].seat.name == "mesh-build");
  CHECK(r.roles[0].holders == std::vector<std::string>{"node-b"});
  CHECK(r.roles[1].holders == std::vector<std::string>{"node-a", "node-b"});
  CHECK(r.roles[2].holders.empty());
  CHECK(r.roles[2].seat.emits.empty());
  CHECK(r.roles[2].seat.uses.empty());
}

TEST_CASE("absent optional parts take the contract's defaults", "[records]") {
  const ParseOutcome outcome = ParseRecords(Doc());
  INFO(Describe(outcome));
  REQUIRE(outcome.ok());
  CHECK(outcome.records.bus.account == "MESH");
  CHECK(outcome.records.bus.replicas == 1);
  CHECK(outcome.records.bus.events_max_age_seconds == 604800);
  CHECK(outcome.records.nodes.empty());
  CHECK(outcome.records.modules.empty());
  CHECK(outcome.records.roles.empty());
  CHECK(outcome.records.controller.submits_to.empty());

  const ParseOutcome bus =
      ParseRecords(Doc(R"("bus":{"replicas":5,"events_max_age_seconds":120,"account":"A_b-9"})"));
  INFO(Describe(bus));
  REQUIRE(bus.ok());
  CHECK(bus.records.bus.replicas == 5);
  CHECK(bus.records.bus.events_max_age_seconds == 120);
  CHECK(bus.records.bus.account == "A_b-9");
}

TEST_CASE("IsValidName accepts lowercase names of 1 to 32 characters", "[records]") {
  const std::string longest(32, 'x');
  for (const std::string_view good :
       {std::string_view("a"), std::string_view("node-a"), std::string_view("mesh-build"),
        std::string_view("a1"), std::string_view("z-"), std::string_view(longest)}) {
    INFO(std::string(good));
    CHECK(IsValidName(good));
  }
  const std::string too_long(33, 'x');
  for (std::string_view bad :
       {std::string_view(""), std::string_view("A"), std::string_view("1a"), std::string_view("-a"),
        std::string_view("a_b"), std::string_view("a.b"), std::string_view("a b"),
        std::string_view("é"), std::string_view(too_long), std::string_view("a\0b", 3)}) {
    INFO(std::string(bad));
    CHECK_FALSE(IsValidName(bad));
  }
}

struct BadRow {
  std::string json;
  std::string path;     // the one error's path
  std::string message;  // a substring of its message
};

std::vector<BadRow> BadRows() {
  const std::string bcrypt = "$2b$10$.GLC1pJmU2OqkLXbYOlnSuWDpWEj3BK0Ujo6O8FZ0CqlqE1E.VtA.";
  return {
      // Not a JSON object.
      {"", "$", "empty document"},
      {"  \n ", "$", "not JSON: The document is empty"},
      {"{", "$", "(at byte offset 1)"},
      {"[]", "$", "expected an object"},
      {"null", "$", "expected an object"},
      {R"("records")", "$", "expected an object"},
      {Doc() + " x", "$", "not JSON: The document root must not be followed by other values"},
      {Doc() + "{}", "$", "must not be followed"},
      {R"({"version":1,"mesh":")"
       "\xff\xfe"
       R"("})",
       "$", "not JSON: Invalid encoding in string"},
      {R"({"version":1,"mesh":")"
       "\xc3\x28"
       R"("})",
       "$", "Invalid encoding"},
      {Doc() + std::string(1, '\0') + "garbage", "$", "NUL byte at byte offset"},
      {std::string(33, '[') + std::string(33, ']'), "$", "nested deeper than 32 levels"},
      {R"({"version":1,"mesh":"m", // comment
          })",
       "$", "not JSON"},
      {R"({"version":NaN})", "$", "not JSON"},
      {R"({"version":1,})", "$", "not JSON"},
      {R"({"mesh":"\ud800"})", "$", "not JSON"},
      {R"({"version":1e400})", "$", "Number too big"},
      {R"({'version':1})", "$", "not JSON"},
      // Required keys.
      {R"({"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "required key is missing"},
      {R"({"version":1,"controller":{"user":"ctl","password":"pw"}})", "mesh",
       "required key is missing"},
      {R"({"version":1,"mesh":"m","nodes":[{"name":"n","password":"pw"}]})", "controller",
       "required key is missing"},
      {DocWithController(R"("password":"pw")"), "controller.user", "required key is missing"},
      {Doc(R"("nodes":[{"password":"pw"}])"), "nodes[0].name", "required key is missing"},
      {Doc(R"("modules":[{"seats":[]}])"), "modules[0].name", "required key is missing"},
      {Doc(R"("modules":[{"name":"mod","seats":[{"accepts":[]}]}])"), "modules[0].seats[0].name",
       "required key is missing"},
      {Doc(R"("roles":[{"holders":[]}])"), "roles[0].name", "required key is missing"},
      // Unknown and repeated keys.
      {Doc(R"("nodse":[])"), "nodse", "unknown key"},
      {Doc(R"("nodes":[{"name":"n","pasword":"x"}])"), "nodes[0].pasword", "unknown key"},
      {Doc(R"("bus":{"shards":2})"), "bus.shards", "unknown key"},
      {DocWithController(R"("user":"ctl","password":"pw","uses":[])"), "controller.uses",
       "unknown key"},
      {Doc(R"("modules":[{"name":"mod","owner":"x"}])"), "modules[0].owner", "unknown key"},
      {Doc(Mesh(R"("holders":["n"])")), "modules[0].seats[0].holders", "unknown key"},
      {Doc(Mesh("", R"("follows":[])")), "roles[0].follows", "unknown key"},
      {Doc(R"("a.b":1)"), R"($["a.b"])", "unknown key"},
      {Doc(R"("mesh":"again")"), "mesh", "duplicate key"},
      // Types.
      {R"({"version":"1","mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "expected an integer"},
      {R"({"version":1.5,"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "expected an integer"},
      {R"({"version":1.0,"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "expected an integer"},
      {R"({"version":99999999999999999999,"mesh":"m","controller":{"user":"ctl","password":"pw"}})",
       "version", "expected an integer"},
      {R"({"version":18446744073709551615,"mesh":"m","controller":{"user":"ctl","password":"pw"}})",
       "version", "integer out of range"},
      {R"({"version":true,"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "expected an integer"},
      {R"({"version":1,"mesh":5,"controller":{"user":"ctl","password":"pw"}})", "mesh",
       "expected a string"},
      {R"({"version":1,"mesh":"m","controller":[],"nodes":[{"name":"n","password":"pw"}]})",
       "controller", "expected an object"},
      {Doc(R"("bus":[])"), "bus", "expected an object"},
      {Doc(R"("bus":{"replicas":"3"})"), "bus.replicas", "expected an integer"},
      {Doc(R"("bus":{"replicas":1.5})"), "bus.replicas", "expected an integer"},
      {Doc(R"("bus":{"account":7})"), "bus.account", "expected a string"},
      {Doc(R"("nodes":{})"), "nodes", "expected an array"},
      {Doc(R"("nodes":null)"), "nodes", "expected an array"},
      {Doc(R"("nodes":["n"])"), "nodes[0]", "expected an object"},
      {Doc(R"("nodes":[{"name":7}])"), "nodes[0].name", "expected a string"},
      {Doc(R"("nodes":[{"name":"n","password":123}])"), "nodes[0].password", "expected a string"},
      {Doc(R"("modules":[{"name":"mod","seats":{}}])"), "modules[0].seats", "expected an array"},
      {Doc(Mesh(R"("uses":"mesh-r")")), "modules[0].seats[0].uses", "expected an array"},
      {Doc(R"("modules":[{"name":"mod","seats":[{"name":"s","accepts":[5]}]}])"),
       "modules[0].seats[0].accepts[0]", "expected a string"},
      {Doc(Mesh("", R"("holders":"n")")), "roles[0].holders", "duplicate key"},
      {Doc(R"("roles":[{"name":"mesh-r","holders":{}}])"), "roles[0].holders", "expected an array"},
      {DocWithController(R"("user":"ctl","password":"pw","follows":[1])"), "controller.follows[0]",
       "expected a string"},
      // Values.
      {R"({"version":2,"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "unsupported version 2 (expected 1)"},
      {R"({"version":0,"mesh":"m","controller":{"user":"ctl","password":"pw"}})", "version",
       "unsupported version 0"},
      {R"({"version":1,"mesh":"","controller":{"user":"ctl","password":"pw"}})", "mesh",
       "must not be empty"},
      {R"({"version":1,"mesh":"a\nb","controller":{"user":"ctl","password":"pw"}})", "mesh",
       "control characters"},
      {Doc(R"("bus":{"replicas":2})"), "bus.replicas", "must be 1, 3 or 5, got 2"},
      {Doc(R"("bus":{"replicas":0})"), "bus.replicas", "must be 1, 3 or 5"},
      {Doc(R"("bus":{"replicas":-1})"), "bus.replicas", "must be 1, 3 or 5"},
      {Doc(R"("bus":{"replicas":4294967297})"), "bus.replicas", "must be 1, 3 or 5"},
      {Doc(R"("bus":{"events_max_age_seconds":119})"), "bus.events_max_age_seconds",
       "must be at least 120"},
      {Doc(R"("bus":{"events_max_age_seconds":-5})"), "bus.events_max_age_seconds",
       "must be at least 120"},
      {Doc(R"("bus":{"events_max_age_seconds":9223372036854775807})"), "bus.events_max_age_seconds",
       "must be at most 9223372036"},
      {Doc(R"("bus":{"account":"1MESH"})"), "bus.account", "invalid account name \"1MESH\""},
      {Doc(R"("bus":{"account":"ME.SH"})"), "bus.account", "invalid account name"},
      {Doc(R"("bus":{"account":""})"), "bus.account", "invalid account name"},
      {Doc(R"("bus":{"account":")" + std::string(65, 'A') + R"("})"), "bus.account",
       "invalid account name"},
      // Names.
      {Doc(R"("nodes":[{"name":"Node_A"}])"), "nodes[0].name",
       "invalid principal name \"Node_A\" (must match ^[a-z][a-z0-9-]{0,31}$)"},
      {Doc(R"("nodes":[{"name":")" + std::string(33, 'n') + R"("}])"), "nodes[0].name",
       "invalid principal name"},
      {DocWithController(R"("user":"ctl.x","password":"pw")"), "controller.user",
       "invalid principal name"},
      {Doc(R"("modules":[{"name":"mod","seats":[{"name":"S"}]}])"), "modules[0].seats[0].name",
       "invalid seat name \"S\""},
      {Doc(Mesh(R"("accepts":["Render"])")), "modules[0].seats[0].accepts", "duplicate key"},
      {Doc(R"("modules":[{"name":"mod","seats":[{"name":"s","accepts":["Render"]}]}])"),
       "modules[0].seats[0].accepts[0]", "invalid work kind name \"Render\""},
      {Doc(R"("modules":[{"name":"mod","seats":[{"name":"s","emits":["a.b"]}]}])"),
       "modules[0].seats[0].emits[0]", "invalid event name \"a.b\""},
      {Doc(R"("modules":[{"name":"mod","seats":[{"name":"mesh-s"}]}])"), "modules[0].seats[0].name",
       "module seat names must not start with \"mesh-\""},
      {Doc(R"("roles":[{"name":"build"}])"), "roles[0].name",
       "role names must start with \"mesh-\""},
      {Doc(R"("roles":[{"name":"mesh_build"}])"), "roles[0].name", "invalid seat name"},
      // Uniqueness.
      {Doc(R"("nodes":[{"name":"ctl"}])"), "nodes[0].name",
       "duplicate principal name \"ctl\" (first at controller.user)"},
      {Doc(R"("nodes":[{"name":"x"}],"modules":[{"name":"x"}])"), "modules[0].name",
       "duplicate principal name \"x\" (first at nodes[0].name)"},
      {Doc(R"("modules":[{"name":"a"},{"name":"a"}])"), "modules[1].name", "duplicate principal"},
      {Doc(R"("nodes":[{"name":"mesh-reconciler"}])"), "nodes[0].name",
       "\"mesh-reconciler\" is reserved"},
      {DocWithController(R"("user":"mesh-reconciler","password":"pw")"), "controller.user",
       "is reserved"},
      {Doc(R"("modules":[{"name":"a","seats":[{"name":"s"}]},{"name":"b","seats":[{"name":"s"}]}])"),
       "modules[1].seats[0].name", "duplicate seat name \"s\" (first at modules[0].seats[0].name)"},
      {Doc(R"("modules":[{"name":"a","seats":[{"name":"s"},{"name":"s"}]}])"),
       "modules[0].seats[1].name", "duplicate seat name"},
      {Doc(R"("roles":[{"name":"mesh-r"},{"name":"mesh-r"}])"), "roles[1].name",
       "duplicate seat name"},
      {Doc(R"("modules":[{"name":"a","seats":[{"name":"s","accepts":["k","k"]}]}])"),
       "modules[0].seats[0].accepts[1]", "duplicate work kind \"k\""},
      {Doc(R"("modules":[{"name":"a","seats":[{"name":"s","emits":["e","f","e"]}]}])"),
       "modules[0].seats[0].emits[2]", "duplicate event \"e\""},
      {Doc(Mesh(R"("uses":["mesh-r","mesh-r"])")), "modules[0].seats[0].uses[1]",
       "duplicate seat \"mesh-r\""},
      {Doc(Mesh("", R"("uses":["s","s"])")), "roles[0].uses[1]", "duplicate seat"},
      {Doc(R"("nodes":[{"name":"n"}],"roles":[{"name":"mesh-r","holders":["n","n"]}])"),
       "roles[0].holders[1]", "duplicate node \"n\""},
      {DocWithController(R"("user":"ctl","password":"pw","submits_to":["s","s"])", Mesh()),
       "controller.submits_to[1]", "duplicate seat"},
      {DocWithController(R"("user":"ctl","password":"pw","follows":["s.e","s.e"])", Mesh()),
       "controller.follows[1]", "duplicate follows entry \"s.e\""},
      // References.
      {Doc(R"("modules":[{"name":"a","seats":[{"name":"s"}]},{"name":"b","seats":[{"name":"t","uses":["mesh-bild"]}]}],"roles":[{"name":"mesh-build"}])"),
       "modules[1].seats[0].uses[0]", "unknown seat \"mesh-bild\""},
      {Doc(Mesh("", R"("uses":["nope"])")), "roles[0].uses[0]", "unknown seat \"nope\""},
      {DocWithController(R"("user":"ctl","password":"pw","submits_to":["mesh-x"])", Mesh()),
       "controller.submits_to[0]", "unknown seat \"mesh-x\""},
      {DocWithController(R"("user":"ctl","password":"pw","follows":["s"])", Mesh()),
       "controller.follows[0]", "expected \"<seat>.<event>\", got \"s\""},
      {DocWithController(R"("user":"ctl","password":"pw","follows":["s.e.x"])", Mesh()),
       "controller.follows[0]", "expected \"<seat>.<event>\""},
      {DocWithController(R"("user":"ctl","password":"pw","follows":[".e"])", Mesh()),
       "controller.follows[0]", "invalid seat name \"\""},
      {DocWithController(R"("user":"ctl","password":"pw","follows":["s.E"])", Mesh()),
       "controller.follows[0]", "invalid event name \"E\""},
      {DocWithController(R"("user":"ctl","password":"pw","follows":["t.e"])", Mesh()),
       "controller.follows[0]", "unknown seat \"t\""},
      {Doc(R"("nodes":[{"name":"n"}],"modules":[{"name":"mod","seats":[{"name":"s","emits":["e"]}],"follows":["s.x"]}])"),
       "modules[0].follows[0]", "seat \"s\" does not emit \"x\""},
      {Doc(R"("roles":[{"name":"mesh-r","holders":["ghost"]}])"), "roles[0].holders[0]",
       "unknown node \"ghost\""},
      {Doc(R"("nodes":[{"name":"n"}],"roles":[{"name":"mesh-r","holders":["N"]}])"),
       "roles[0].holders[0]", "invalid node name"},
      // Credentials.
      {Doc(R"("nodes":[{"name":"n","password":"pw","password_bcrypt":")" + bcrypt + R"("}])"),
       "nodes[0].password_bcrypt", "password and password_bcrypt are both given"},
      {DocWithController(R"("user":"ctl","password_bcrypt":")" + bcrypt + R"(","password":"pw")"),
       "controller.password", "both given"},
      {Doc(R"("nodes":[{"name":"n","password_bcrypt":"$2a$10$short"}])"),
       "nodes[0].password_bcrypt", "not a bcrypt hash"},
      {Doc(R"("nodes":[{"name":"n","password_bcrypt":"$1$)" + bcrypt.substr(3) + R"("}])"),
       "nodes[0].password_bcrypt", "not a bcrypt hash"},
      {Doc(R"("nodes":[{"name":"n","password_bcrypt":"$2b$99$)" + bcrypt.substr(7) + R"("}])"),
       "nodes[0].password_bcrypt", "not a bcrypt hash"},
      {Doc(R"("nodes":[{"name":"n","password_bcrypt":")" + bcrypt.substr(0, 59) + R"(!"}])"),
       "nodes[0].password_bcrypt", "not a bcrypt hash"},
      {Doc(R"("modules":[{"name":"mod","password":""}])"), "modules[0].password",
       "must not be empty"},
      {Doc(R"("nodes":[{"name":"n","password":"a\u0000b"}])"), "nodes[0].password", "NUL"},
      {Doc(R"("nodes":[{"name":"n","password":")" + std::string(73, 'p') + R"("}])"),
       "nodes[0].password", "longer than 72 bytes"},
      {R"({"version":1,"mesh":"m","controller":{"user":"ctl"},"nodes":[{"name":"n"}]})", "$",
       "no principal has a credential"},
      {R"({"version":1,"mesh":"m","controller":{"user":"ctl"}})", "$",
       "no principal has a credential"},
  };
}

TEST_CASE("bad records are refused with the path and the reason", "[records]") {
  const std::vector<BadRow> rows = BadRows();
  REQUIRE(rows.size() >= 40);
  for (const BadRow& row : rows) {
    const ParseOutcome outcome = ParseRecords(row.json);
    INFO("input: " << row.json.substr(0, 300));
    INFO("errors:\n" << Describe(outcome));
    CHECK(outcome.errors.size() == 1);
    if (outcome.errors.empty()) continue;
    CHECK(outcome.errors[0].path == row.path);
    CHECK_THAT(outcome.errors[0].message, Catch::Matchers::Contains(row.message));
  }
}

TEST_CASE("the reconciler's user name from ParseOptions is reserved", "[records]") {
  ParseOptions options;
  options.reconciler_user = "ops";
  const ParseOutcome refused = ParseRecords(Doc(R"("nodes":[{"name":"ops"}])"), options);
  REQUIRE(refused.errors.size() == 1);
  CHECK(refused.errors[0] == ValidationError{"nodes[0].name", refused.errors[0].message});
  CHECK_THAT(refused.errors[0].message, Catch::Matchers::Contains("reserved"));

  const ParseOutcome allowed =
      ParseRecords(Doc(R"("nodes":[{"name":"mesh-reconciler"}])"), options);
  INFO(Describe(allowed));
  CHECK(allowed.ok());
}

TEST_CASE("every error is reported at once, in document order", "[records]") {
  // Roles come before modules in this document; the controller refers forward to seat "s".
  const std::string json = R"({
    "mesh": "m",
    "roles": [ { "name": "build", "holders": ["ghost"] } ],
    "controller": { "user": "ctl", "password": "pw", "submits_to": ["s", "nope"] },
    "nodes": [ { "name": "n", "pasword": "x" }, { "name": "ctl" } ],
    "modules": [ { "name": "mod", "seats": [ { "name": "s", "uses": ["mesh-late", "mesh-bild"] } ] } ],
    "bus": { "replicas": 2 },
    "version": 2
  })";
  const ParseOutcome outcome = ParseRecords(json);
  INFO(Describe(outcome));
  std::vector<std::string> paths;
  for (const ValidationError& e : outcome.errors) paths.push_back(e.path);
  CHECK(paths == std::vector<std::string>{
                     "roles[0].name",
                     "roles[0].holders[0]",
                     "controller.submits_to[1]",
                     "nodes[0].pasword",
                     "nodes[1].name",
                     "modules[0].seats[0].uses[0]",
                     "modules[0].seats[0].uses[1]",
                     "bus.replicas",
                     "version",
                 });
  REQUIRE(outcome.errors.size() == 9);
  CHECK(outcome.errors[5].ToString() == R"(modules[0].seats[0].uses[0]: unknown seat "mesh-late")");
  CHECK(outcome.errors[6].ToString() == R"(modules[0].seats[0].uses[1]: unknown seat "mesh-bild")");
}

TEST_CASE("a pathological number of errors is cut short", "[records]") {
  std::string kinds = "[";
  for (int i = 0; i < 5000; ++i) kinds += (i ? ",0" : "0");
  kinds += "]";
  const ParseOutcome outcome = ParseRecords(
      Doc(R"("modules":[{"name":"m","seats":[{"name":"s","accepts":)" + kinds + "}]}]"));
  REQUIRE(outcome.errors.size() == 1001);
  CHECK(outcome.errors[0].path == "modules[0].seats[0].accepts[0]");
  CHECK(outcome.errors[999].path == "modules[0].seats[0].accepts[999]");
  CHECK(outcome.errors[1000] ==
        ValidationError{"$", "too many errors: stopped after the first 1000"});

  // Millions of bad entries at the size limit: the walk stops, in bounded work. The bound is on
  // this thread's CPU time, not the wall clock (a loaded CI machine once took 7 s of wall time
  // for well under one of CPU), and generous: it is here to catch quadratic work (hours on
  // millions of entries), not to benchmark.
  std::string huge =
      R"({"version":1,"mesh":"m","controller":{"user":"ctl","password":"pw"},"nodes":[0)";
  while (huge.size() + 4 < kMaxRecordsBytes) huge += ",0";
  huge += "]}";
  const auto cpu_now = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
  };
  const auto start = cpu_now();
  const ParseOutcome many = ParseRecords(huge);
  CHECK(cpu_now() - start < std::chrono::seconds(30));
  REQUIRE(many.errors.size() == 1001);
  CHECK(many.errors[999] == ValidationError{"nodes[999]", "expected an object"});
}

TEST_CASE("secrets are never echoed in errors", "[records]") {
  const std::string secret = "$2b$10$tooshortbutsecret";
  const std::string long_password(80, 's');
  const ParseOutcome outcome = ParseRecords(Doc(R"("nodes":[{"name":"n","password_bcrypt":")" +
                                                secret + R"("},{"name":"o","password":")" +
                                                long_password + R"(","password_bcrypt":"x"}])"));
  INFO(Describe(outcome));
  REQUIRE(outcome.errors.size() == 4);
  for (const ValidationError& e : outcome.errors) {
    CHECK(e.message.find("tooshort") == std::string::npos);
    CHECK(e.message.find("ssssssss") == std::string::npos);
  }
}

TEST_CASE("names echoed in errors are escaped and cut short", "[records]") {
  const ParseOutcome outcome =
      ParseRecords(Doc(R"("nodes":[{"name":"a\"b\u0001)" + std::string(100, 'x') + R"("}])"));
  REQUIRE(outcome.errors.size() == 1);
  CHECK_THAT(outcome.errors[0].message,
             Catch::Matchers::StartsWith(R"(invalid principal name "a\"b\u0001xxx)"));
  CHECK_THAT(outcome.errors[0].message, Catch::Matchers::Contains(R"(xx"... (must match)"));
}

TEST_CASE("huge input is refused before parsing", "[records]") {
  const std::string huge(50 * 1024 * 1024, '[');
  const auto start = std::chrono::steady_clock::now();
  const ParseOutcome outcome = ParseRecords(huge);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE(outcome.errors.size() == 1);
  CHECK(outcome.errors[0].path == "$");
  CHECK_THAT(outcome.errors[0].message,
             Catch::Matchers::Contains("more than the limit of 16777216"));
  CHECK(elapsed < std::chrono::milliseconds(100));

  // The limit itself is allowed: a valid document padded with whitespace to exactly the limit.
  std::string at_limit = Doc();
  at_limit.resize(kMaxRecordsBytes, ' ');
  const ParseOutcome accepted = ParseRecords(at_limit);
  INFO(Describe(accepted));
  CHECK(accepted.ok());
  at_limit.push_back(' ');
  const ParseOutcome refused = ParseRecords(at_limit);
  REQUIRE(refused.errors.size() == 1);
  CHECK(refused.errors[0].path == "$");
}

TEST_CASE("deep nesting is refused without a crash", "[records]") {
  for (const std::string& opener : {std::string("["), std::string(R"({"a":)")}) {
    std::string deep;
    for (int i = 0; i < 1'000'000; ++i) deep += opener;
    const ParseOutcome outcome = ParseRecords(deep);
    REQUIRE(outcome.errors.size() == 1);
    CHECK(outcome.errors[0].path == "$");
    CHECK_THAT(outcome.errors[0].message, Catch::Matchers::Contains("nested deeper"));
  }
  // Deep but within the limit, inside a document: an ordinary type error.
  const ParseOutcome nested = ParseRecords(Doc(R"("nodes":[[[[[[[[[[]]]]]]]]]])"));
  REQUIRE(nested.errors.size() == 1);
  CHECK(nested.errors[0] == ValidationError{"nodes[0]", "expected an object"});
}

TEST_CASE("random bytes and mutated records never crash", "[records]") {
  std::mt19937 random(20240611);  // fixed seed: the same inputs every run
  std::uniform_int_distribution<int> byte(0, 255);
  for (int i = 0; i < 2000; ++i) {
    std::string input(static_cast<size_t>(byte(random)), '\0');
    for (char& c : input) c = static_cast<char>(byte(random));
    const ParseOutcome outcome = ParseRecords(input);
    CHECK_FALSE(outcome.ok());
  }
  const std::string example = Example();
  std::uniform_int_distribution<size_t> position(0, example.size() - 1);
  for (int i = 0; i < 2000; ++i) {
    std::string mutated = example;
    for (int flips = 1 + i % 3; flips > 0; --flips) {
      mutated[position(random)] = static_cast<char>(byte(random));
    }
    const ParseOutcome outcome = ParseRecords(mutated);
    for (const ValidationError& e : outcome.errors) {
      CHECK_FALSE(e.path.empty());
      CHECK_FALSE(e.message.empty());
    }
  }
}

}  // namespace
}  // namespace mesh::model
