// How to reach the bus: its URLs, the reconciler's credentials, TLS trust, and the request
// limits. Read by the connection (bus.h) and by the TLS trust it sets up (tls_trust.h), which
// includes only this, not the connection.
//
// Thread-safety: a plain value.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace mesh::observers {

struct BusSettings {
  std::vector<std::string> urls;  // nats://host:port; never carry credentials
  std::string user = "mesh-reconciler";
  std::string password;  // never logged
  // TLS (observers/tls_trust.h, docs/tls.md); the pin wins when both are set.
  std::string ca_file;           // trust the CAs of this PEM file only; the certificate must
                                 // name the URL's host
  std::string pinned_cert_file;  // accept exactly this certificate (MESH_BROKER_CERTIFICATE),
                                 // whatever it names, within its validity window
  std::chrono::milliseconds request_timeout{5000};
  std::chrono::milliseconds connect_timeout{3000};
  int max_in_flight = 16;  // per connection
  // Connections a RequestMany with Spread::kLanes may use, this one included (1: this one
  // alone). See Spread.
  int lanes = 4;
};

}  // namespace mesh::observers
