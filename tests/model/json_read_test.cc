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

}  // namespace
}  // namespace mesh::model::json
