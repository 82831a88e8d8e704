#include "observers/api_audit.h"

#include <catch2/catch.hpp>
#include <string>

namespace mesh::observers {
namespace {

// As a standalone nats-server 2.9.10 sent them on $JS.EVENT.ADVISORY.API (ids and times as
// they came; the create's answer shortened).
constexpr char kDeleted[] =
    R"({"type":"io.nats.jetstream.advisory.v1.api_audit","id":"bTPCtNIon9x1IYoyTCDjGt",)"
    R"("timestamp":"2026-12-07T00:14:52.366465693Z","server":"NCQL5MNCTMRBX5E2O4T3FYZTWY5HE44H)"
    R"(4PQKOA5IR2GG5T7UQNUGZW6G","client":{"acc":"$G","rtt":368693,"server":"NCQL5MNCTMRBX5E2O4)"
    R"(T3FYZTWY5HE44H4PQKOA5IR2GG5T7UQNUGZW6G"},"subject":"$JS.API.STREAM.DELETE.DECL",)"
    R"("response":"{\"type\":\"io.nats.jetstream.api.v1.stream_delete_response\",)"
    R"(\"success\":true}"})";
constexpr char kNotFound[] =
    R"({"type":"io.nats.jetstream.advisory.v1.api_audit","id":"bTPCtNIon9x1IYoyTCDjKh",)"
    R"("timestamp":"2026-12-07T00:14:52.665428586Z","server":"NCQL5MNCTMRBX5E2O4T3FYZTWY5HE44H)"
    R"(4PQKOA5IR2GG5T7UQNUGZW6G","client":{"acc":"$G","rtt":368693,"server":"NCQL5MNCTMRBX5E2O4)"
    R"(T3FYZTWY5HE44H4PQKOA5IR2GG5T7UQNUGZW6G"},"subject":"$JS.API.STREAM.DELETE.DECL",)"
    R"("response":"{\"type\":\"io.nats.jetstream.api.v1.stream_delete_response\",\"error\":)"
    R"({\"code\":404,\"err_code\":10059,\"description\":\"stream not found\"}}"})";
constexpr char kCreated[] =
    R"({"type":"io.nats.jetstream.advisory.v1.api_audit","id":"bTPCtNIon9x1IYoyTCDj9H",)"
    R"("timestamp":"2026-12-07T00:14:52.065991229Z","server":"NCQL5MNCTMRBX5E2O4T3FYZTWY5HE44H)"
    R"(4PQKOA5IR2GG5T7UQNUGZW6G","client":{"acc":"$G","rtt":368693,"server":"NCQL5MNCTMRBX5E2O4)"
    R"(T3FYZTWY5HE44H4PQKOA5IR2GG5T7UQNUGZW6G"},"subject":"$JS.API.STREAM.CREATE.DECL",)"
    R"("request":"{\"name\": \"DECL\", \"subjects\": [\"mesh.decl.\u003e\"]}",)"
    R"("response":"{\"type\":\"io.nats.jetstream.api.v1.stream_create_response\",)"
    R"(\"did_create\":true}"})";

TEST_CASE("A stream deletion's audit names the stream only when the server answered success",
          "[observers]") {
  CHECK(StreamDeletionAnswered(kDeleted) == std::optional<std::string>("DECL"));
  // A second deletion of a stream already dropped from the lists is answered at once with an
  // error, while the first may still be removing the folder: not an answer to wait for.
  CHECK_FALSE(StreamDeletionAnswered(kNotFound));
  CHECK_FALSE(StreamDeletionAnswered(kCreated));
}

TEST_CASE("An audit's request or response that quotes a deletion subject is not one",
          "[observers]") {
  // The quotes inside the request string are escaped: the cheap search does not match them,
  // and a parse would read the real subject anyway.
  const std::string quoted =
      R"({"type":"io.nats.jetstream.advisory.v1.api_audit","subject":"$JS.API.STREAM.INFO.X",)"
      R"("request":"{\"subject\":\"$JS.API.STREAM.DELETE.DECL\"}","response":"{\"success\":true}"})";
  CHECK_FALSE(StreamDeletionAnswered(quoted));
  // Not JSON, cut short, another shape: nothing.
  const std::string cut(kDeleted, sizeof kDeleted / 2);
  CHECK_FALSE(StreamDeletionAnswered(cut));
  CHECK_FALSE(StreamDeletionAnswered(""));
  CHECK_FALSE(StreamDeletionAnswered(
      R"({"subject":"$JS.API.STREAM.DELETE.","response":"{\"success\":true}"})"));
  CHECK_FALSE(StreamDeletionAnswered(
      R"({"subject":"$JS.API.STREAM.DELETE.A.B","response":"{\"success\":true}"})"));
  CHECK_FALSE(StreamDeletionAnswered(R"({"subject":"$JS.API.STREAM.DELETE.A","response":"{}"})"));
  CHECK_FALSE(
      StreamDeletionAnswered(R"({"subject":"$JS.API.STREAM.DELETE.A","response":"success"})"));
}

}  // namespace
}  // namespace mesh::observers
