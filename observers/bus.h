// The connection to the bus and a pipelined JetStream API requester.
//
// Ownership: BusConnection owns its natsConnection (and options) through unique_ptrs with the
// matching destroy functions. Thread-safety: one BusConnection is used by the reconcile thread
// only; cnats invokes the event callbacks (advisories, reconnects) on its own threads, and those
// only forward to the EventSink (which must be thread-safe and must not block).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/names.h"
#include "model/result.h"

namespace mesh::observers {

struct BusSettings {
  std::vector<std::string> urls;  // nats://host:port; never carry credentials
  std::string user = "mesh-reconciler";
  std::string password;           // never logged
  std::string ca_file;            // TLS: trust this CA
  std::string pinned_cert_file;   // TLS: accept exactly this certificate (MESH_BROKER_CERTIFICATE)
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds connect_timeout{3000};
  int max_in_flight = 16;
};

// One JetStream API request and its answer.
struct ApiRequest {
  std::string subject;  // e.g. "$JS.API.STREAM.LIST"
  std::string payload;  // JSON, may be empty
};
struct ApiReply {
  Status status;        // transport outcome: ok, or timeout / unavailable
  std::string payload;  // the JSON answer when status is ok (may hold an API "error" object)
};

enum class BusEvent { kAdvisory, kReconnected, kDisconnected };
using EventSink = std::function<void(BusEvent, const std::string& subject)>;

class BusConnection {
 public:
  // Connects (with the inbox prefix "_INBOX.<user>"); the error names the address alone.
  static Result<std::unique_ptr<BusConnection>> Connect(const BusSettings& settings,
                                                        EventSink events = nullptr);
  ~BusConnection();
  BusConnection(const BusConnection&) = delete;
  BusConnection& operator=(const BusConnection&) = delete;

  bool connected() const;
  std::string connected_url() const;  // without credentials

  // Sends every request, keeping at most settings.max_in_flight outstanding, and returns the
  // replies in the same order. Each reply's status is independent: one timeout fails one reply.
  std::vector<ApiReply> RequestMany(const std::vector<ApiRequest>& requests);
  ApiReply Request(const ApiRequest& request);

  // Subscribes the advisory subjects ($JS.EVENT.ADVISORY.STREAM.> and .CONSUMER.>) and
  // forwards each message to the EventSink as kAdvisory.
  Status SubscribeAdvisories();

  // Total API requests sent since connect (for metrics and benchmarks).
  int64_t requests_sent() const;

 private:
  BusConnection();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::observers
