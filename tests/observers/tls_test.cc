// The bus over TLS against a real nats-server (tls { cert_file, key_file }), with certificates
// made at test time: trusting a CA file, pinning the bus's own certificate (which may name
// nothing), and refusing any other certificate before a credential is sent -- on the first
// connection and on every reconnect.
#include <nats/nats.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <ctime>
#include <mutex>

#include "observers/bus.h"
#include "observers/certificate.h"
#include "observers/http_client.h"
#include "observers/tls_trust.h"
#include "tests/support/bus_fixture.h"
#include "tests/support/nats_server.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"

namespace mesh::observers {
namespace {

using testing::CertificateSpec;
using testing::MakeCertificate;
using testing::NatsServer;
using testing::TempDir;
using testing::TestCertificate;
using testing::WaitFor;

// nats-server 2.9 logs a failed login as "... - authentication error" (and tells the client
// "Authorization Violation"); a refused handshake as "TLS handshake error".
constexpr const char* kAuthErrorLog = "authentication error";
constexpr const char* kHandshakeErrorLog = "TLS handshake error";
// A password the server refuses: had it been sent, the server would log an authentication error.
constexpr const char* kWrongPassword = "wrong-password-xyz";

// Sets an environment variable for the test's duration (read by OpenSSL when cnats creates
// its TLS context), then restores it.
class EnvOverride {
 public:
  EnvOverride(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~EnvOverride() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::unique_ptr<NatsServer> StartTlsServer(const TestCertificate& served) {
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  options.extra_config = testing::TlsServerConfig(served);
  return NatsServer::Start(options);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ServerLog(const NatsServer& server) {
  return testing::ReadFile(server.log_file());
}

// Client connections the server holds right now (its monitoring endpoint).
int OpenConnections(const NatsServer& server) {
  auto varz = HttpGet(server.monitor_url() + "/connz", std::chrono::seconds(2));
  REQUIRE(varz.ok());
  const std::string key = "\"num_connections\": ";
  const size_t at = varz->body.find(key);
  REQUIRE(at != std::string::npos);
  return std::stoi(varz->body.substr(at + key.size()));
}

BusSettings PinnedSettings(const NatsServer& server, const TestCertificate& pin,
                           const std::string& password = testing::kReconcilerPassword) {
  BusSettings settings = testing::BusSettingsFor(server, testing::kReconcilerUser, password);
  settings.pinned_cert_file = pin.cert_file;
  return settings;
}

int64_t ExpiryOf(const TestCertificate& certificate) {
  auto facts = ReadCertificateFile(certificate.cert_file);
  REQUIRE(facts.ok());
  return facts->not_after_unix;
}

std::string FingerprintOf(const TestCertificate& certificate) {
  auto facts = ReadCertificateFile(certificate.cert_file);
  REQUIRE(facts.ok());
  return facts->sha256;
}

// Events seen by an EventSink, safe to read from the test thread.
class EventLog {
 public:
  EventSink Sink() {
    return [this](BusEvent event, const std::string&) {
      std::lock_guard<std::mutex> lock(mutex_);
      events_.push_back(event);
    };
  }
  int CountOf(BusEvent event) {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int>(std::count(events_.begin(), events_.end(), event));
  }

 private:
  std::mutex mutex_;
  std::vector<BusEvent> events_;
};

// Connects to `server` pinning `pin`, with kWrongPassword; requires the reconciler's own
// refusal (kRefused, before any credential is sent) and returns its text.
std::string PinnedRefusal(const NatsServer& server, const TestCertificate& pin) {
  auto bus = BusConnection::Connect(PinnedSettings(server, pin, kWrongPassword));
  REQUIRE_FALSE(bus.ok());
  INFO(bus.status().ToString());
  CHECK(bus.status().code() == Errc::kRefused);
  return bus.status().ToString();
}

CertificateSpec CaSpec(const std::string& common_name) {
  CertificateSpec spec;
  spec.common_name = common_name;
  spec.is_ca = true;
  return spec;
}

// A certificate for the URL's address ("bus", IP 127.0.0.1) signed by `ca`.
CertificateSpec BusLeafSpec(const TestCertificate& ca) {
  CertificateSpec spec;
  spec.common_name = "bus";
  spec.ip_names = {"127.0.0.1"};
  spec.issuer = &ca;
  return spec;
}

// A pin that names nothing, and an impostor that would satisfy cnats on its own: issued for
// the URL's address by a CA that OpenSSL's default store (SSL_CERT_FILE) trusts while this
// object lives.
struct PinAndTrustedImpostor {
  explicit PinAndTrustedImpostor(const std::string& dir)
      : pin(MakeCertificate(CertificateSpec(), dir, "pin")),
        public_ca(MakeCertificate(CaSpec("a public CA"), dir, "public-ca")),
        impostor(MakeCertificate(ImpostorSpec(public_ca), dir, "impostor")),
        system_store("SSL_CERT_FILE", public_ca.cert_file) {}

  static CertificateSpec ImpostorSpec(const TestCertificate& ca) {
    CertificateSpec spec;
    spec.ip_names = {"127.0.0.1"};
    spec.issuer = &ca;
    return spec;
  }

  const TestCertificate pin;
  const TestCertificate public_ca;
  const TestCertificate impostor;
  EnvOverride system_store;
};

TEST_CASE("A certificate's times are written as RFC 3339 in UTC", "[tls]") {
  CHECK(FormatUnixTime(0) == "1970-01-01T00:00:00Z");
  CHECK(FormatUnixTime(1795949730) == "2026-11-29T10:55:30Z");
  CHECK(FormatUnixTime(-1) == "1969-12-31T23:59:59Z");
}

TEST_CASE("Certificate facts: the openssl-style SHA-256 fingerprint and the validity window",
          "[observers][tls]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;
  spec.common_name = "bus";
  spec.not_after = 10 * 86400;
  const TestCertificate cert = MakeCertificate(spec, dir.path, "bus");
  auto facts = ReadCertificateFile(cert.cert_file);
  REQUIRE(facts.ok());
  CHECK(facts->sha256.size() == 32 * 3 - 1);
  CHECK(facts->sha256.find_first_not_of("0123456789ABCDEF:") == std::string::npos);
  CHECK(facts->subject == "CN=bus");
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  CHECK(std::abs(facts->not_after_unix - (now + 10 * 86400)) < 60);
  CHECK(ValidityAt(*facts, now) == Validity::kValid);
  CHECK(ValidityAt(*facts, facts->not_after_unix + 1) == Validity::kExpired);
  CHECK(ValidityAt(*facts, facts->not_before_unix - 1) == Validity::kNotYetValid);
  // A key file is not a certificate: refused, and the message does not quote it.
  auto key = ReadCertificateFile(cert.key_file);
  REQUIRE_FALSE(key.ok());
  CHECK(key.status().message().find("PRIVATE") == std::string::npos);
}

TEST_CASE("CA file: a certificate from the CA naming the URL's host is trusted",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  const TestCertificate ca = MakeCertificate(CaSpec("mesh test CA"), dir.path, "ca");
  CertificateSpec leaf_spec = BusLeafSpec(ca);
  leaf_spec.not_after = 20 * 86400;
  const TestCertificate leaf = MakeCertificate(leaf_spec, dir.path, "leaf");
  auto server = StartTlsServer(leaf);

  BusSettings settings = testing::BusSettingsFor(*server);
  settings.ca_file = ca.cert_file;
  auto bus = BusConnection::Connect(settings);
  INFO(bus.status().ToString());
  REQUIRE(bus.ok());
  CHECK((*bus)->Request({"$JS.API.INFO", ""}).status.ok());
  // The expiry is the presented certificate's, not the CA's.
  CHECK((*bus)->certificate_expiry() == ExpiryOf(leaf));
  CHECK((*bus)->certificate_expiry() != ExpiryOf(ca));
}

TEST_CASE("CA file: the wrong name, another CA, or only the system's CAs are refused",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  const TestCertificate ca = MakeCertificate(CaSpec("mesh test CA"), dir.path, "ca");
  const TestCertificate other_ca = MakeCertificate(CaSpec("mesh test CA"), dir.path, "other-ca");
  CertificateSpec leaf_spec = BusLeafSpec(ca);

  TestCertificate served;
  std::optional<EnvOverride> system_store;
  std::string expected;
  SECTION("signed by the CA but naming another host") {
    leaf_spec.ip_names = {"10.9.9.9"};
    leaf_spec.dns_names = {"elsewhere.example"};
    served = MakeCertificate(leaf_spec, dir.path, "leaf");
    expected = "IP address mismatch";
  }
  SECTION("signed by the CA but naming nothing") {
    leaf_spec.common_name.clear();
    leaf_spec.ip_names.clear();
    served = MakeCertificate(leaf_spec, dir.path, "leaf");
    expected = "IP address mismatch";
  }
  SECTION("naming the host but signed by another CA") {
    leaf_spec.issuer = &other_ca;
    served = MakeCertificate(leaf_spec, dir.path, "leaf");
    expected = "unable to get local issuer certificate";
  }
  SECTION("naming the host, signed by a CA the system trusts but the CA file does not hold") {
    // OpenSSL's default store (which cnats' own TLS context loads) reads SSL_CERT_FILE.
    system_store.emplace("SSL_CERT_FILE", other_ca.cert_file);
    leaf_spec.issuer = &other_ca;
    served = MakeCertificate(leaf_spec, dir.path, "leaf");
    expected = "unable to get local issuer certificate";
  }
  auto server = StartTlsServer(served);
  BusSettings settings = testing::BusSettingsFor(*server, testing::kReconcilerUser, "wrong-pw");
  settings.ca_file = ca.cert_file;
  auto bus = BusConnection::Connect(settings);
  REQUIRE_FALSE(bus.ok());
  const std::string message = bus.status().ToString();
  INFO(message);
  CHECK(message.find(expected) != std::string::npos);
  CHECK(message.find(server->url()) != std::string::npos);
  CHECK(Count(ServerLog(*server), kAuthErrorLog) == 0);  // the password never left
}

TEST_CASE("A pinned self-signed certificate that names nothing is accepted",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;  // no subject, no subjectAltName: valid for no name at all
  spec.not_after = 40 * 86400;
  const TestCertificate pin = MakeCertificate(spec, dir.path, "bus");
  auto server = StartTlsServer(pin);

  auto bus = BusConnection::Connect(PinnedSettings(*server, pin));
  INFO(bus.status().ToString());
  REQUIRE(bus.ok());
  CHECK((*bus)->connected());
  ApiReply reply = (*bus)->Request({"$JS.API.INFO", ""});
  REQUIRE(reply.status.ok());
  CHECK(reply.payload.find("account_info_response") != std::string::npos);
  CHECK((*bus)->certificate_expiry() == ExpiryOf(pin));

  // Against the same server, verification by name fails: the pin is what makes it work.
  BusSettings by_ca = testing::BusSettingsFor(*server);
  by_ca.ca_file = pin.cert_file;
  CHECK_FALSE(BusConnection::Connect(by_ca).ok());
}

TEST_CASE("FetchPresentedCertificate reads the server's certificate without logging in",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;
  spec.common_name = "bus";
  const TestCertificate served = MakeCertificate(spec, dir.path, "bus");
  auto server = StartTlsServer(served);

  auto presented = FetchPresentedCertificate(server->url(), std::chrono::seconds(2));
  REQUIRE(presented.ok());
  CHECK(presented->sha256 == FingerprintOf(served));
  CHECK(presented->subject == "CN=bus");
  CHECK(OpenConnections(*server) == 0);

  auto closed = FetchPresentedCertificate("nats://127.0.0.1:" + std::to_string(testing::FreePort()),
                                          std::chrono::seconds(2));
  REQUIRE_FALSE(closed.ok());
  CHECK(closed.status().code() == Errc::kUnavailable);
}

TEST_CASE("Another certificate than the pinned one is refused before any credential is sent",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;
  spec.common_name = "bus";  // same subject, another key
  const TestCertificate pin = MakeCertificate(spec, dir.path, "pinned");
  const TestCertificate impostor = MakeCertificate(spec, dir.path, "impostor");
  REQUIRE(FingerprintOf(pin) != FingerprintOf(impostor));
  auto server = StartTlsServer(impostor);

  const std::string message = PinnedRefusal(*server, pin);
  INFO(message);
  CHECK(message.find("fingerprint did not match") != std::string::npos);
  CHECK(message.find("expected " + FingerprintOf(pin)) != std::string::npos);
  CHECK(message.find("presented " + FingerprintOf(impostor)) != std::string::npos);
  CHECK(message.find(server->url()) != std::string::npos);
  CHECK(message.find(kWrongPassword) == std::string::npos);
  CHECK(Count(ServerLog(*server), kAuthErrorLog) == 0);
  CHECK(OpenConnections(*server) == 0);

  // The control: pinning what the server presents, the same wrong password reaches the server.
  auto control = BusConnection::Connect(PinnedSettings(*server, impostor, kWrongPassword));
  REQUIRE_FALSE(control.ok());
  CHECK(control.status().message().find("Authorization Violation") != std::string::npos);
  CHECK(WaitFor([&] { return Count(ServerLog(*server), kAuthErrorLog) == 1; }));
}

// A plain cnats connection (no hook): secure, trusting only `trusted_pem` as its CA.
natsStatus PlainCnatsConnect(const NatsServer& server, const std::string& trusted_pem,
                             std::string& error) {
  natsOptions* raw_options = nullptr;
  REQUIRE(natsOptions_Create(&raw_options) == NATS_OK);
  std::unique_ptr<natsOptions, void (*)(natsOptions*)> options(raw_options, natsOptions_Destroy);
  REQUIRE(natsOptions_SetURL(options.get(), server.url().c_str()) == NATS_OK);
  REQUIRE(natsOptions_SetUserInfo(options.get(), "admin", "admin") == NATS_OK);
  REQUIRE(natsOptions_SetSecure(options.get(), true) == NATS_OK);
  REQUIRE(natsOptions_SetCATrustedCertificates(options.get(), trusted_pem.c_str()) == NATS_OK);
  natsConnection* raw = nullptr;
  const natsStatus s = natsConnection_Connect(&raw, options.get());
  error = s == NATS_OK ? "" : nats_GetLastError(nullptr);
  natsConnection_Destroy(raw);
  return s;
}

TEST_CASE("cnats alone: a no-name pin fails, a system CA's certificate for the host passes",
          "[observers][tls][integration][server]") {
  // A characterisation of Debian's cnats 3.4, and why BusConnection installs its own check:
  // with the pin as its only configured CA, cnats still checks the URL's host (so a pin naming
  // nothing can never pass) and still trusts OpenSSL's default store (so any certificate a
  // system CA issued for the host passes).
  TempDir dir("mesh-tls");
  const PinAndTrustedImpostor certificates(dir.path);
  const TestCertificate& pin = certificates.pin;
  std::string error;

  SECTION("the genuine, pinned server") {
    auto server = StartTlsServer(pin);
    CHECK(PlainCnatsConnect(*server, pin.cert_pem, error) != NATS_OK);
    CHECK(error.find("mismatch") != std::string::npos);
    CHECK(BusConnection::Connect(PinnedSettings(*server, pin)).ok());
  }
  SECTION("a server presenting another certificate, from a system CA") {
    auto server = StartTlsServer(certificates.impostor);
    INFO(error);
    CHECK(PlainCnatsConnect(*server, pin.cert_pem, error) == NATS_OK);
    auto bus = BusConnection::Connect(PinnedSettings(*server, pin));
    REQUIRE_FALSE(bus.ok());
    CHECK(bus.status().message().find("fingerprint did not match") != std::string::npos);
  }
}

TEST_CASE("Every reconnect is checked: a server back with another certificate gets no login",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  const PinAndTrustedImpostor certificates(dir.path);
  const TestCertificate& pin = certificates.pin;
  const TestCertificate& impostor = certificates.impostor;

  // The server serves whatever is in these two files at its start.
  TestCertificate served = pin;
  served.cert_file = dir.path + "/served.crt";
  served.key_file = dir.path + "/served.key";
  auto serve = [&](const TestCertificate& c) {
    testing::WriteFile(served.cert_file, c.cert_pem);
    testing::WriteFile(served.key_file, c.key_pem);
  };
  serve(pin);
  auto server = StartTlsServer(served);
  EventLog events;
  // The right password: if the impostor got CONNECT, it would log the user in.
  auto bus = BusConnection::Connect(PinnedSettings(*server, pin), events.Sink());
  REQUIRE(bus.ok());
  REQUIRE((*bus)->certificate_expiry() == ExpiryOf(pin));

  server->Stop();
  serve(impostor);
  const size_t handshake_errors_before = Count(ServerLog(*server), kHandshakeErrorLog);
  server->Restart();
  // cnats retries every 250 ms: wait until the impostor has refused several handshakes.
  REQUIRE(WaitFor([&] {
    return Count(ServerLog(*server), kHandshakeErrorLog) >= handshake_errors_before + 3;
  }));
  CHECK_FALSE((*bus)->connected());
  CHECK(events.CountOf(BusEvent::kReconnected) == 0);
  CHECK(OpenConnections(*server) == 0);
  auto connz =
      HttpGet(server->monitor_url() + "/connz?state=closed&auth=1", std::chrono::seconds(2));
  REQUIRE(connz.ok());
  CHECK(connz->body.find(testing::kReconcilerUser) == std::string::npos);  // nobody logged in

  // The genuine server back: the same connection reconnects by itself.
  server->Stop();
  serve(pin);
  server->Restart();
  REQUIRE(WaitFor([&] { return events.CountOf(BusEvent::kReconnected) >= 1; }));
  REQUIRE(WaitFor([&] { return (*bus)->connected(); }));
  CHECK((*bus)->Request({"$JS.API.INFO", ""}).status.ok());
}

TEST_CASE("An expired pinned certificate is refused, naming its expiry",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;
  spec.common_name = "bus";
  spec.not_before = -10 * 86400;
  spec.not_after = -86400;
  const TestCertificate expired = MakeCertificate(spec, dir.path, "expired");
  auto server = StartTlsServer(expired);

  const std::string message = PinnedRefusal(*server, expired);
  INFO(message);
  CHECK(message.find("expired at") != std::string::npos);
  CHECK(message.find(FingerprintOf(expired)) != std::string::npos);
  CHECK(Count(ServerLog(*server), kAuthErrorLog) == 0);
}

TEST_CASE("With a pin, a server without TLS or an unreadable pin is refused",
          "[observers][tls][integration][server]") {
  TempDir dir("mesh-tls");
  CertificateSpec spec;
  const TestCertificate pin = MakeCertificate(spec, dir.path, "pin");
  testing::NatsServerOptions options;
  options.users_conf = testing::ReconcilerUsersConf();
  auto plain = NatsServer::Start(options);

  SECTION("plaintext server") {
    auto bus = BusConnection::Connect(PinnedSettings(*plain, pin, kWrongPassword));
    REQUIRE_FALSE(bus.ok());
    CHECK(bus.status().message().find("does not offer TLS") != std::string::npos);
    CHECK(Count(ServerLog(*plain), kAuthErrorLog) == 0);
  }
  SECTION("pin file absent") {
    BusSettings settings = PinnedSettings(*plain, pin);
    settings.pinned_cert_file = dir.path + "/absent.pem";
    auto bus = BusConnection::Connect(settings);
    REQUIRE_FALSE(bus.ok());
    CHECK(bus.status().message().find(dir.path + "/absent.pem") != std::string::npos);
  }
  SECTION("pin file holding a key, not a certificate") {
    BusSettings settings = PinnedSettings(*plain, pin);
    settings.pinned_cert_file = pin.key_file;
    auto bus = BusConnection::Connect(settings);
    REQUIRE_FALSE(bus.ok());
    CHECK(bus.status().code() == Errc::kInvalidArgument);
    CHECK(bus.status().message().find("PRIVATE") == std::string::npos);
  }
}

}  // namespace
}  // namespace mesh::observers
