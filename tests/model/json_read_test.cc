// model/json_read.h: the one lenient reader of server answers; absent, null and a wrong type
// all read as absent.
#include "model/json_read.h"

#include <catch2/catch.hpp>

namespace mesh::model::json {
namespace {

TEST_CASE("json_read: absent, null and other types read as absent", "[model]") {
  auto doc = ParseObject(R"({"s":"text","n":null,"i":42,"f":1.5,"o":{"s":"inner"},"b":true})");
  REQUIRE(doc);
  CHECK(String(*doc, "s") == "text");
  CHECK(String(*doc, "n").empty());
  CHECK(String(*doc, "i").empty());
  CHECK(String(*doc, "missing").empty());
  CHECK(Int(*doc, "i", -1) == 42);
  CHECK(Int(*doc, "f", -1) == -1);
  CHECK(Int(*doc, "n", -1) == -1);
  CHECK(Int(*doc, "s", -1) == -1);
  CHECK(Bool(*doc, "b", false));
  CHECK(Bool(*doc, "s", true));
  CHECK_FALSE(Bool(*doc, "i", false));
  CHECK_FALSE(Bool(*doc, "missing", false));
  CHECK(Member(*doc, "n") == nullptr);
  CHECK(Member(*doc, "missing") == nullptr);
  const rapidjson::Value* inner = Member(*doc, "o");
  REQUIRE(inner != nullptr);
  CHECK(String(*inner, "s") == "inner");
}

TEST_CASE("json_read: ParseObject takes one object and nothing else", "[model]") {
  CHECK(ParseObject("{}"));
  CHECK_FALSE(ParseObject("[1]"));
  CHECK_FALSE(ParseObject("\"text\""));
  CHECK_FALSE(ParseObject("{"));
  CHECK_FALSE(ParseObject(""));
}

enum class Shade { kLight, kDark };
constexpr EnumNames<Shade, 2> kShadeNames{{{
    {Shade::kLight, "light"},
    {Shade::kDark, "dark"},
}}};

TEST_CASE("json_read: the strict reader keeps the first error, with its path", "[model]") {
  auto doc = ParseObject(
      R"({"s":"text","i":42,"b":true,"d":1.5,"a":["x","y"],"e":"dark","o":{"n":null}})");
  REQUIRE(doc);
  StrictReader r;
  CHECK(r.Str(*doc, "s", "$") == "text");
  CHECK(r.Int(*doc, "i", "$") == 42);
  CHECK(r.Bool(*doc, "b", "$"));
  CHECK(r.Double(*doc, "d", "$") == 1.5);
  CHECK(r.Strings(*doc, "a", "$") == std::vector<std::string>{"x", "y"});
  CHECK(r.Enum(*doc, "e", "$", kShadeNames) == Shade::kDark);
  CHECK(r.OptionalStr(*doc, "absent", "$").empty());
  CHECK(r.ok());
  // Unlike the lenient functions, a wrong type and an absent field are errors; the first stays.
  CHECK(r.Int(*doc, "s", "$") == 0);
  CHECK_FALSE(r.ok());
  CHECK(r.error() == "$.s: not an integer");
  r.Str(*doc, "missing", "$");
  CHECK(r.error() == "$.s: not an integer");

  StrictReader missing;
  const rapidjson::Value* o = missing.Member(*doc, "o", "$");
  REQUIRE(o != nullptr);
  missing.Str(*o, "n", "$.o");
  CHECK(missing.error() == "$.o.n: not a string");
  StrictReader unknown;
  unknown.Enum(*doc, "s", "$", kShadeNames);
  CHECK(unknown.error() == "$.s: unknown value \"text\"");
}

}  // namespace
}  // namespace mesh::model::json
