// Log lines (reconciler/base/log.h): a field keeps its type, so a JSON line carries counts as JSON
// numbers and flags as booleans ({"drift":0,"converged":true}, what a log pipeline can sum and
// filter on), text as escaped strings; logfmt writes the same values bare and quotes only text
// that needs it.
#include "reconciler/base/log.h"

#include <rapidjson/document.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace mesh::reconciler {
namespace {

constexpr const char* kNow = "2026-12-01T22:00:00.000Z";

rapidjson::Document ParseLine(const std::string& line) {
  REQUIRE(!line.empty());
  REQUIRE(line.back() == '\n');
  rapidjson::Document doc;
  doc.Parse(line.data(), line.size() - 1);
  REQUIRE_FALSE(doc.HasParseError());
  REQUIRE(doc.IsObject());
  return doc;
}

TEST_CASE("log times are RFC 3339 in UTC with milliseconds, before 1970 too", "[log]") {
  CHECK(FormatRfc3339Millis(0) == "1970-01-01T00:00:00.000Z");
  CHECK(FormatRfc3339Millis(1795949730123) == "2026-11-29T10:55:30.123Z");
  CHECK(FormatRfc3339Millis(1709164800000) == "2024-02-29T00:00:00.000Z");
  CHECK(FormatRfc3339Millis(-1) == "1969-12-31T23:59:59.999Z");
}

TEST_CASE("a JSON log line keeps numbers and booleans as JSON numbers and booleans", "[log]") {
  const size_t drift = 0;
  const int failed = 2;
  const int64_t in_ms = -5;
  const uint64_t requests = std::numeric_limits<uint64_t>::max();
  const std::string line =
      FormatLogLine(LogFormat::kJson, LogLevel::kInfo, kNow, 42, "pass finished",
                    {{"drift", drift},
                     {"failed", failed},
                     {"in_ms", in_ms},
                     {"api_requests", requests},
                     {"converged", true},
                     {"held", false},
                     {"duration_seconds", 0.125},
                     {"trigger", "periodic"},
                     {"count_as_text", std::string("7")}});
  const rapidjson::Document doc = ParseLine(line);
  CHECK(doc["ts"].GetString() == std::string(kNow));
  CHECK(doc["level"].GetString() == std::string("info"));
  REQUIRE(doc["pass"].IsUint64());
  CHECK(doc["pass"].GetUint64() == 42);
  CHECK(doc["msg"].GetString() == std::string("pass finished"));
  REQUIRE(doc["drift"].IsUint64());
  CHECK(doc["drift"].GetUint64() == 0);
  REQUIRE(doc["failed"].IsInt());
  CHECK(doc["failed"].GetInt() == 2);
  REQUIRE(doc["in_ms"].IsInt64());
  CHECK(doc["in_ms"].GetInt64() == -5);
  REQUIRE(doc["api_requests"].IsUint64());
  CHECK(doc["api_requests"].GetUint64() == requests);
  REQUIRE(doc["converged"].IsBool());
  CHECK(doc["converged"].GetBool());
  REQUIRE(doc["held"].IsBool());
  CHECK_FALSE(doc["held"].GetBool());
  REQUIRE(doc["duration_seconds"].IsDouble());
  CHECK(doc["duration_seconds"].GetDouble() == 0.125);
  REQUIRE(doc["trigger"].IsString());
  CHECK(doc["trigger"].GetString() == std::string("periodic"));
  // Text that looks like a number stays text: the type is the caller's, never guessed.
  REQUIRE(doc["count_as_text"].IsString());
  CHECK(doc["count_as_text"].GetString() == std::string("7"));
}

TEST_CASE("a real number is written in its shortest form and NaN or infinity as text", "[log]") {
  CHECK(LogValue(0.1).text() == "0.1");
  CHECK(LogValue(std::round(1.23456 * 1000) / 1000).text() == "1.235");
  CHECK(LogValue(3.0).text() == "3");
  CHECK(LogValue(3.0).type() == LogValue::Type::kNumber);
  CHECK(LogValue(std::nan("")).text() == "nan");
  CHECK(LogValue(std::numeric_limits<double>::infinity()).text() == "inf");
  CHECK(LogValue(-std::numeric_limits<double>::infinity()).text() == "-inf");
  CHECK(LogValue(std::nan("")).type() == LogValue::Type::kString);
  // A JSON line with a NaN still parses.
  const std::string line =
      FormatLogLine(LogFormat::kJson, LogLevel::kWarn, kNow, 0, "m", {{"x", std::nan("")}});
  const rapidjson::Document doc = ParseLine(line);
  CHECK(doc["x"].GetString() == std::string("nan"));
  CHECK_FALSE(doc.HasMember("pass"));  // pass 0: not within a pass
}

TEST_CASE("JSON log strings escape quotes, backslashes and control characters", "[log]") {
  const std::string line = FormatLogLine(LogFormat::kJson, LogLevel::kError, kNow, 1, "say \"hi\"",
                                         {{"detail", "a\\b\nc\td\x01"}});
  CHECK(line.find("\\u0001") != std::string::npos);
  const rapidjson::Document doc = ParseLine(line);
  CHECK(doc["msg"].GetString() == std::string("say \"hi\""));
  CHECK(doc["detail"].GetString() == std::string("a\\b\nc\td\x01"));
}

TEST_CASE("logfmt writes numbers and booleans bare and quotes only text that needs it", "[log]") {
  const std::string line =
      FormatLogLine(LogFormat::kLogfmt, LogLevel::kInfo, kNow, 7, "pass finished",
                    {{"drift", size_t{3}},
                     {"converged", false},
                     {"duration_seconds", 0.5},
                     {"trigger", "periodic"},
                     {"reason", "two words"},
                     {"quoted", "a=b"}});
  CHECK(line ==
        "ts=2026-12-01T22:00:00.000Z level=info pass=7 msg=\"pass finished\" drift=3 "
        "converged=false duration_seconds=0.5 trigger=periodic reason=\"two words\" "
        "quoted=\"a=b\"\n");
}

// Before, every good lease round logged error="", and the runbook's `grep -i error` found them
// all among the passes that failed.
TEST_CASE("a text field without text is left out of the line", "[log]") {
  for (LogFormat format : {LogFormat::kLogfmt, LogFormat::kJson}) {
    const std::string line = FormatLogLine(format, LogLevel::kInfo, kNow, 3, "lease",
                                           {{"role", "holder"}, {"error", ""}, {"count", 0}});
    INFO(line);
    CHECK(line.find("error") == std::string::npos);
    CHECK(line.find("holder") != std::string::npos);
    CHECK(line.find("count") != std::string::npos);  // a zero is a value
  }
}

}  // namespace
}  // namespace mesh::reconciler
