// The connection to the bus and a pipelined JetStream API requester.
//
// Ownership: BusConnection owns its natsConnection (and options) through unique_ptrs with the
// matching destroy functions. Thread-safety: one BusConnection is used by the reconcile thread
// only; cnats invokes the event callbacks (advisories, reconnects) on its own threads, and those
// only forward to the EventSink (which must be thread-safe and must not block).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/names.h"
#include "model/result.h"
#include "observers/bus_settings.h"
#include "observers/server_version.h"

namespace mesh::observers {

// One JetStream API request and its answer.
struct ApiRequest {
  std::string subject;  // e.g. "$JS.API.STREAM.LIST"
  std::string payload;  // JSON, may be empty
};
struct ApiReply {
  Status status;        // transport outcome: ok, or timeout / unavailable
  std::string payload;  // the JSON answer when status is ok (may hold an API "error" object)
};

// How RequestMany may send a batch.
enum class Spread {
  kOneConnection,  // this connection alone: for reads, and for batches too small to gain
  // Also on up to settings.lanes - 1 further connections ("lanes") to the server this one is on,
  // when that server handles a connection's JetStream API requests one after another
  // (HandlesApiRequestsInPlace: 2.9 to 2.11.9), so that it handles them side by side. The
  // lanes open in the background at the first such batch (each costs the server one bcrypt of
  // our password), carry requests from the next batch on, never reconnect (a lost one is
  // dropped and opened again later), and close when unused for a minute. For a large apply.
  kLanes,
};

// What the EventSink is told, and what its text is for each:
enum class BusEvent {
  kAdvisory,                // a stream or consumer advisory: its subject
  kStreamDeletionAnswered,  // the server answered a stream's deletion with success: the stream
  kReconnected,             // cnats reconnected: the server's URL (no credential)
  kDisconnected,            // cnats lost the connection: ""
};
using EventSink = std::function<void(BusEvent, const std::string& text)>;

// Whether SubscribeAdvisories also forwards the answers to stream deletions, read from the API
// audit advisories (observers/api_audit.h). The server sends one for every JetStream API request
// of the account, the reconciler's own included, so they are subscribed only where nothing else
// tells when a deleted stream's store is gone (RecreationWait).
enum class DeletionAnswers { kNotForwarded, kForwarded };

class BusConnection {
 public:
  // Connects (with the inbox prefix "_INBOX.<user>"); the error names the address alone.
  // With a pin, every configured server's certificate is first fetched and compared without
  // sending CONNECT: a different one is refused (kRefused) with both SHA-256 fingerprints, before
  // any credential leaves. With a pin or a CA file, the same check runs inside every TLS
  // handshake cnats makes, reconnects included (cnats alone would also trust the system's CAs
  // for any name).
  static Result<std::unique_ptr<BusConnection>> Connect(const BusSettings& settings,
                                                        EventSink events = nullptr);
  ~BusConnection();
  BusConnection(const BusConnection&) = delete;
  BusConnection& operator=(const BusConnection&) = delete;

  bool connected() const;
  // False from a request that expired with no answer to anything since it was sent (the bus
  // stopped answering: a frozen server keeps its socket open, so cnats still says connected)
  // until the next answer. Thread-safe.
  bool answering() const;
  // Lost and being re-established by cnats (which then reports kReconnected): keep this
  // connection rather than replace it, or the reconnect that wakes a pass never comes.
  bool reconnecting() const;
  // How many times cnats has reconnected this connection (to the same server after a blip, or
  // to a server restarted, perhaps from a restored store): what was seen before may be gone.
  uint64_t reconnects() const;
  std::string connected_url() const;  // without credentials
  // The server's id for this connection (its cid in /connz); nullopt when not connected.
  std::optional<uint64_t> client_id() const;

  // Sends every request, keeping at most settings.max_in_flight outstanding per connection, and
  // returns the replies in the same order. The requests of one batch may be handled in any
  // order (on several lanes, or by a server that dispatches them to a pool). Each reply's status is
  // independent: one timeout fails one reply. Two faults fail the batch fast instead of one timeout
  // per request: the connection lost (outstanding and unsent requests fail kUnavailable at once),
  // and a bus that stopped answering (a request expired with no answer to anything since it was
  // sent: the requests not yet sent fail kUnavailable "not sent", those in flight run to their
  // deadlines).
  std::vector<ApiReply> RequestMany(const std::vector<ApiRequest>& requests,
                                    Spread spread = Spread::kOneConnection);
  // The lanes open now (see Spread::kLanes); for tests and benchmarks.
  int lanes_open() const;
  // Lanes that could not be opened since connect (each attempt opens settings.lanes - 1 side by
  // side; after one that opened none, the next comes a minute later), and the last one's error:
  // it names the address, never a credential. A batch meanwhile goes on the connections open.
  // Counted when the attempt ends, which may be after the batch that started it. Thread-safe.
  struct LaneFailures {
    int64_t count = 0;
    std::string last_error;
  };
  LaneFailures lane_failures() const;
  ApiReply Request(const ApiRequest& request);

  // Subscribes the advisory subjects ($JS.EVENT.ADVISORY.STREAM.> and .CONSUMER.>) and
  // forwards each message to the EventSink as kAdvisory. With DeletionAnswers::kForwarded, also
  // $JS.EVENT.ADVISORY.API, forwarding each successful stream deletion as
  // kStreamDeletionAnswered and dropping every other audit on cnats' thread; at most 8 MiB
  // of them wait there (beyond, cnats drops them for that subscription alone: a recreation
  // waiting for a dropped answer waits out its bound).
  Status SubscribeAdvisories(DeletionAnswers answers = DeletionAnswers::kNotForwarded);

  // notAfter (Unix seconds) of the certificate the server presented on the latest TLS
  // handshake; nullopt on a plaintext connection. The source of
  // mesh_reconciler_bus_certificate_expiry_timestamp_seconds. Thread-safe.
  std::optional<int64_t> certificate_expiry() const;

  // The cnats connection, for cnats APIs this class does not wrap (the lease's KV store). Owned
  // by this object; use it from the owning thread only.
  natsConnection* native_handle() const;

  // Total API requests sent since connect (for metrics and benchmarks).
  int64_t requests_sent() const;

  // The version of the server this connection is on (observers/server_version.h), read from
  // its INFO greeting on a short probe connection the first time it is asked and again after
  // the connection moved to another server (a rolling upgrade mixes versions). nullopt when
  // the probe failed: callers then take what works on every version (2.9's requests).
  std::optional<ServerVersion> server_version();

 private:
  BusConnection();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mesh::observers
