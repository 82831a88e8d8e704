// Reads every stream and consumer of the account with the JetStream list APIs (pages of up to
// 256, the consumer lists of all streams kept max_in_flight at once, 256 lists per batch so
// that only one batch of answers is held at a time, and over the bus's lanes when there is more
// than one batch), never one info request per object. Also the JSON codec between the API's
// configuration objects and the model's specs, shared with apply so that what is written and what
// is read back agree.
//
// Thread-safety: call from the thread that owns the BusConnection.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// Consumers by the stream they are on.
using KnownConsumers = std::map<StreamName, std::vector<ObservedConsumer>>;

// Whose consumers are listed. Every stream of the account is listed (a stream list is one
// request per 256 streams), but consumers only on the streams the mesh owns: those carrying its
// ownership mark. A desired name present without the mark is someone else's (conventions 7.2)
// and its consumers are never examined, so they are not listed either: KV buckets, foreign
// streams and their consumers cost no request and can never fail a pass.

struct ObserveScope {
  // The mesh's ownership mark (model::OwnershipMark); nullopt lists consumers on every stream.
  std::optional<std::string> ownership_mark;
  // Streams whose every consumer the caller already has from the server's own answers (a pass,
  // for a stream it created: the acknowledged creations of its consumers). When the stream as
  // listed counts exactly that many consumers, they are taken as given and not listed again;
  // any other count (one added, deleted or not yet counted meanwhile) lists them as usual.
  const KnownConsumers* known_consumers = nullptr;
  // The desired state, when the caller has one. An object whose decoded config equals its
  // desired spec has nothing to update, so its raw_config (the server's whole config, which
  // only an update reads) is left empty rather than held: at ten times the Large mesh that is
  // about 30 MiB. nullptr keeps every object's raw_config.
  const model::DesiredState* desired = nullptr;
  bool Covers(const ObservedStream& stream) const;
};

// Lists the streams and the consumers in scope. An empty account is an empty result, not an
// error. Each object is decoded on its own: a value this build does not know is that object's
// `problem`, never a failed observation.
Result<ObservedJetStream> ObserveJetStream(BusConnection& bus, const ObserveScope& scope = {});

// The same for the named streams alone: one STREAM.INFO each (all in flight at once), then the
// consumers of those in scope. A name the server does not know is simply absent. What a pass
// repairs first when advisories name owned streams (a few requests, not the account's lists);
// `cluster_size` is then only what these streams' groups show.
Result<ObservedJetStream> ObserveStreams(BusConnection& bus, const std::set<StreamName>& names,
                                         const ObserveScope& scope = {});

// Decoding of an API "config" object into the normalised spec (server defaults made explicit,
// subjects sorted, durations in ns). Exposed for unit tests; an unknown value is an error here.
Result<model::StreamSpec> DecodeStreamConfig(std::string_view config_json);
Result<model::ConsumerSpec> DecodeConsumerConfig(std::string_view stream,
                                                 std::string_view config_json);

// The per-object decoding the lists use: a config with a value this build does not know is
// decoded with that field at its default and the value named in `problem`. An error only when
// the config is not an object or names no stream (such a list entry is skipped).
Result<ObservedStream> DecodeObservedStream(std::string_view config_json);
Result<ObservedConsumer> DecodeObservedConsumer(std::string_view stream,
                                                std::string_view config_json);

}  // namespace mesh::observers
