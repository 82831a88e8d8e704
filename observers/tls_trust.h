// TLS trust for the bus connection (docs/tls.md). Two ways to trust the bus:
//
//   kCaFile  (--ca-file): the server's chain must end at a CA of that file -- and only of that
//            file, never the system's CAs -- and the certificate must name the host of the URL
//            being connected (DNS or IP subjectAltName, as OpenSSL checks it; cnats supplies
//            the host; with none supplied the handshake is refused).
//   kPinned  (MESH_BROKER_CERTIFICATE, a PEM file): the server must present exactly that
//            certificate (SHA-256 of its DER encoding), within its validity window. Its names do
//            not matter: a self-signed certificate naming nothing is fine.
//
// The pin wins when both are configured.
//
// Enforcement, for every handshake of the connection including each reconnect: cnats 3.4 has
// no verification callback. The SSL_CTX it creates trusts the system's CAs too (it calls
// SSL_CTX_set_default_verify_paths), and Debian's build checks the URL's host on every
// handshake (NATS_FORCE_HOST_VERIFICATION), so on its own cnats would refuse a pinned
// certificate that names nothing yet accept any certificate a system CA issued for the host.
// InstallTlsTrust therefore catches the SSL_CTX cnats creates for our options (an OpenSSL
// ex_data "new" hook, armed on the calling thread only for that call) and replaces its peer
// check (SSL_CTX_set_cert_verify_callback) with ours. Before that, a pinned connection runs
// PreflightPinned: it fetches each server's certificate itself, without sending CONNECT, and
// refuses with both fingerprints when they differ -- so a wrong certificate is refused before a
// byte of credentials leaves, with a message an operator can act on.
//
// Thread-safety: PreflightPinned and InstallTlsTrust are free functions; TlsObservations is
// internally synchronised (written by cnats' threads during handshakes, read by anyone).
#pragma once

#include <nats/nats.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "model/result.h"
#include "model/thread_safety.h"
#include "observers/bus_settings.h"
#include "observers/certificate.h"

namespace mesh::observers {

enum class TlsMode { kPlain, kCaFile, kPinned };
TlsMode TlsModeOf(const BusSettings& settings);

// What the installed check saw, shared between the BusConnection and cnats' SSL_CTX (which
// owns the check and may outlive the connection object by a reconnect thread's last breath).
class TlsObservations {
 public:
  void RecordPresented(const CertificateFacts& facts);
  void RecordRejection(const std::string& why);
  // The certificate the server presented on the latest handshake (accepted or not).
  std::optional<CertificateFacts> presented() const;
  // Why the latest refused handshake was refused; empty when none was.
  std::string rejection() const;

 private:
  mutable Mutex mutex_;
  std::optional<CertificateFacts> presented_ GUARDED_BY(mutex_);
  std::string rejection_ GUARDED_BY(mutex_);
};

// Makes `options` secure (natsOptions_SetSecure) and installs the check described above into
// the SSL_CTX cnats creates for them. Call on a fresh natsOptions, before connecting; kPlain
// settings are an error. Errors name the files, never their content.
Result<std::shared_ptr<const TlsObservations>> InstallTlsTrust(natsOptions* options,
                                                               const BusSettings& settings);

// The certificate a NATS server presents at `url`: TCP, the plaintext INFO line (which must
// offer TLS), then a TLS handshake that verifies nothing; closed without sending CONNECT.
// Errors: kUnavailable/kTimeout (unreachable), kRefused (not a NATS server offering TLS),
// kIo (handshake failed).
Result<CertificateFacts> FetchPresentedCertificate(const std::string& url,
                                                   std::chrono::milliseconds timeout);

// The pinned connection's pre-flight: reads the pin, refuses an expired or not yet valid pin,
// then fetches the certificate of every configured server; any reachable server presenting
// another certificate is refused (kRefused) with the expected and presented SHA-256
// fingerprints and its address. Unreachable servers are skipped; none reachable is an error.
Status PreflightPinned(const std::vector<std::string>& urls, const std::string& pin_file,
                       std::chrono::milliseconds timeout);

}  // namespace mesh::observers
