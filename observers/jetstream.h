// Reads every stream and consumer of the account with the JetStream list APIs (pages of up to
// 256, the consumer lists of all streams kept max_in_flight at once), never one info request
// per object. Also the JSON codec between the API's configuration objects and the model's
// specs, shared with apply so that what is written and what is read back agree.
//
// Thread-safety: call from the thread that owns the BusConnection.
#pragma once

#include <string>
#include <string_view>

#include "model/desired.h"
#include "model/result.h"
#include "observers/bus.h"
#include "observers/observed.h"

namespace mesh::observers {

// A JetStream API error answer: {"error":{"code":400,"err_code":10058,"description":"..."}}.
struct ApiError {
  int code = 0;
  int err_code = 0;
  std::string description;
};
// nullopt when the answer carries no "error" object.
std::optional<ApiError> ParseApiError(std::string_view payload);

// Lists everything. An empty account is an empty result, not an error.
Result<ObservedJetStream> ObserveJetStream(BusConnection& bus);

// Decoding of an API "config" object into the normalised spec (server defaults made explicit,
// subjects sorted, durations in ns). Exposed for unit tests.
Result<model::StreamSpec> DecodeStreamConfig(std::string_view config_json);
Result<model::ConsumerSpec> DecodeConsumerConfig(std::string_view stream,
                                                 std::string_view config_json);

// Encoding for create/update requests: the full API config object.
std::string EncodeStreamConfig(const model::StreamSpec& spec);
// The body of $JS.API.CONSUMER.DURABLE.CREATE.<stream>.<durable>: {"stream_name":..,"config":..}
std::string EncodeConsumerCreate(const model::ConsumerSpec& spec);

}  // namespace mesh::observers
