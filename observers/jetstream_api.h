// The JetStream subjects the reconciler speaks, in one place: the API requests it sends (nats-
// server server/jetstream_api.go, the JSApi* subjects), the advisories it subscribes to and
// reads (JSAdvisory*), and the API error codes it acts on (server/errors.json). No other code
// sends to or parses a "$JS." subject; the permissions the users file grants on them are the
// contract's, derived in model/desired.cc. The lease's KV bucket is reached through cnats'
// KeyValue API (reconciler/pass/lease_store.cc), its "$KV." subjects in reconciler/plan/.
//
// Thread-safety: constants and pure functions.
#pragma once

#include <string>
#include <string_view>

namespace mesh::observers::jsapi {

inline constexpr std::string_view kPrefix = "$JS.API.";

inline std::string Api(std::string_view what) {
  return std::string(kPrefix) + std::string(what);
}
inline std::string Api(std::string_view what, std::string_view stream) {
  return Api(what) + std::string(stream);
}
inline std::string Api(std::string_view what, std::string_view stream, std::string_view consumer) {
  return Api(what, stream) + "." + std::string(consumer);
}

// Listing and reading (the observers, the CLI's show-* commands).
inline std::string StreamList() {
  return Api("STREAM.LIST");
}
inline std::string StreamInfo(std::string_view stream) {
  return Api("STREAM.INFO.", stream);
}
inline std::string ConsumerList(std::string_view stream) {
  return Api("CONSUMER.LIST.", stream);
}
inline std::string ConsumerInfo(std::string_view stream, std::string_view consumer) {
  return Api("CONSUMER.INFO.", stream, consumer);
}

// Writing (apply/ only).
inline std::string StreamCreate(std::string_view stream) {
  return Api("STREAM.CREATE.", stream);
}
inline std::string StreamUpdate(std::string_view stream) {
  return Api("STREAM.UPDATE.", stream);
}
inline std::string StreamDelete(std::string_view stream) {
  return Api("STREAM.DELETE.", stream);
}
// 2.10+: creates or updates as the request's "action" says.
inline std::string ConsumerCreate(std::string_view stream, std::string_view durable) {
  return Api("CONSUMER.CREATE.", stream, durable);
}
// 2.9: creates, or silently updates a durable that exists.
inline std::string ConsumerDurableCreate(std::string_view stream, std::string_view durable) {
  return Api("CONSUMER.DURABLE.CREATE.", stream, durable);
}
inline std::string ConsumerDelete(std::string_view stream, std::string_view consumer) {
  return Api("CONSUMER.DELETE.", stream, consumer);
}

// Advisories: the subscriptions, and the prefixes before the stream's name.
inline constexpr const char* kStreamAdvisories = "$JS.EVENT.ADVISORY.STREAM.>";
inline constexpr const char* kConsumerAdvisories = "$JS.EVENT.ADVISORY.CONSUMER.>";
// One after the answer to every API request of the account (observers/api_audit.h).
inline constexpr const char* kApiAudits = "$JS.EVENT.ADVISORY.API";
inline constexpr std::string_view kStreamCreated = "$JS.EVENT.ADVISORY.STREAM.CREATED.";
inline constexpr std::string_view kStreamDeleted = "$JS.EVENT.ADVISORY.STREAM.DELETED.";
inline constexpr std::string_view kStreamUpdated = "$JS.EVENT.ADVISORY.STREAM.UPDATED.";
inline constexpr std::string_view kConsumerCreated = "$JS.EVENT.ADVISORY.CONSUMER.CREATED.";
inline constexpr std::string_view kConsumerDeleted = "$JS.EVENT.ADVISORY.CONSUMER.DELETED.";

// API error codes.
inline constexpr int kStreamNotFound = 10059;    // JSStreamNotFoundErr
inline constexpr int kConsumerNotFound = 10014;  // JSConsumerNotFoundErr

}  // namespace mesh::observers::jsapi
