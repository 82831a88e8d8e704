// Which JetStream advisories wake a pass. The subject names the stream and the consumer
// (nats-server jetstream_api.go: $JS.EVENT.ADVISORY.STREAM.{CREATED,DELETED,UPDATED}.<stream>,
// $JS.EVENT.ADVISORY.CONSUMER.{CREATED,DELETED}.<stream>.<consumer>); neither the subject nor
// the payload (JSConsumerActionAdvisory: stream, consumer, action) says whether a consumer is
// durable, so a consumer wakes a pass only when its name is one the mesh knows on that stream.
//
// Pure: no I/O, no clock. Thread-safety: free functions over values.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace mesh::reconciler {

// What the mesh owns, as the last pass saw it.
struct AdvisoryScope {
  std::set<std::string, std::less<>> streams;  // desired, or carrying the ownership mark
  // "<stream>.<durable>" (names never contain a dot): every desired consumer, and every durable
  // observed on an owned stream (its deletion or change is drift; an unexpected one's too).
  std::set<std::string, std::less<>> consumers;
};

// True when the advisory is about an owned stream, or about a consumer on one that is known or
// has the mesh's shape there (model::HasMeshDurableShape: a durable the records derive or
// once derived, e.g. decl_<removed node>, which would be unexpected). A lifecycle advisory
// before any scope is known (`scope` null) wakes; advisories that follow message traffic
// (MAX_DELIVERIES, MSG_TERMINATED, LEADER_ELECTED, ...) never do. An empty subject (unknown)
// wakes. Any other consumer does not wake: ephemerals (server-named, eight random characters)
// cannot be told from a client's durable with a name of its own by the subject or the payload,
// and an unexpected durable is only reported, so the next periodic pass finds such a one.
bool AdvisoryWakes(std::string_view subject, const AdvisoryScope* scope);

// The stream an advisory names, when it wakes (AdvisoryWakes) and says that a stream was
// created, deleted or changed, or that a consumer on it was created or deleted: the loop
// repairs that stream alone (Trigger::kRepair), and a full pass follows only when the repair
// did not settle it (loop.h). A creation is planned as the full pass would plan it: a desired
// stream or durable someone made is compared, updated where the server allows it and reported
// where not; an unexpected durable is reported (by the full pass the unsettled repair wakes).
// Our own repairs' creations name their stream too, and the repair that follows finds it as
// desired. Nullopt before any scope is known.
std::optional<std::string> RepairTarget(std::string_view subject, const AdvisoryScope* scope);

// The stream a deletion advisory names: STREAM.DELETED.<stream>, or CONSUMER.DELETED.<stream>.
// <consumer> for any consumer, ephemerals included. Deleting a stream, the server deletes each
// of its consumers first (an advisory each), then sends the stream's own advisory, and only then
// removes the folder; so the last of these for a stream tells when that removal can begin
// (nats-server v2.9.10 stream.go, (*stream).stop). Nullopt for any other subject.
struct DeletionAdvisory {
  std::string_view stream;
  bool consumer = false;  // a consumer's deletion (else the stream's own)
};
std::optional<DeletionAdvisory> DeletionNamed(std::string_view subject);

}  // namespace mesh::reconciler
