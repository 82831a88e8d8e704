// Whole passes over a TLS bus, as deployed: the reconciler pins the bus's own certificate
// (MESH_BROKER_CERTIFICATE) or trusts a CA file, converges, and reports the certificate's
// expiry (the source of mesh_bus_certificate_expiry_timestamp_seconds).
#include <catch2/catch.hpp>
#include <filesystem>

#include "observers/certificate.h"
#include "reconciler/pass.h"
#include "tests/reconciler/pass_fixtures.h"
#include "tests/support/test_certificates.h"

namespace mesh::reconciler {
namespace {

namespace fs = std::filesystem;
using mesh::testing::CertificateSpec;
using mesh::testing::MakeCertificate;
using mesh::testing::TestCertificate;

// A nats-server serving `served`, whose users file is the reconciler's rendering of the
// example records; the reconciler's settings point at it.
struct TlsMesh {
  std::string dir = mesh::testing::MakeTempDir("mesh-tls-pass");
  std::unique_ptr<mesh::testing::NatsServer> server;
  std::string records_path = dir + "/records.json";

  explicit TlsMesh(const TestCertificate& served) {
    const std::string json = test::ExampleRecordsJson();
    mesh::testing::WriteFile(records_path, json);
    mesh::testing::NatsServerOptions options;
    options.users_conf = test::RenderedUsersConf(json);
    options.extra_config = mesh::testing::TlsServerConfig(served);
    server = mesh::testing::NatsServer::Start(options);
  }
  ~TlsMesh() {
    server.reset();
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
  Settings PassSettings() const {
    Settings settings;
    settings.records_path = records_path;
    settings.bus.urls = {server->url()};
    settings.bus.user = test::kReconcilerUser;
    settings.bus.password = test::kReconcilerPassword;
    settings.bus.request_timeout = std::chrono::seconds(5);
    settings.bus.connect_timeout = std::chrono::seconds(2);
    settings.users_file = server->users_file();
    settings.pid_file = server->pid_file();
    settings.monitor_url = server->monitor_url();
    settings.bcrypt_cost = test::kCheapCost;
    return settings;
  }
};

int64_t ExpiryOf(const TestCertificate& certificate) {
  auto facts = observers::ReadCertificateFile(certificate.cert_file);
  REQUIRE(facts.ok());
  return facts->not_after_unix;
}

TEST_CASE("A pass over a pinned TLS bus converges and knows the certificate's expiry",
          "[pass][tls][integration]") {
  std::string certs = mesh::testing::MakeTempDir("mesh-tls-certs");
  CertificateSpec spec;  // self-signed, naming nothing
  spec.not_after = 50 * 86400;
  const TestCertificate pin = MakeCertificate(spec, certs, "broker");
  TlsMesh mesh(pin);
  Settings settings = mesh.PassSettings();
  settings.bus.pinned_cert_file = pin.cert_file;

  Reconciler reconciler(settings);
  PassReport report = reconciler.RunPass(1, Trigger::kStart, ApplyMode::kApply);
  INFO(report.status.ToString());
  CHECK(report.status.ok());
  CHECK(report.converged());
  CHECK(reconciler.bus_connected());
  CHECK(reconciler.bus_certificate_expiry() == ExpiryOf(pin));

  // Another certificate pinned: the pass fails, saying so, and connects to nothing.
  const TestCertificate other = MakeCertificate(spec, certs, "other");
  settings.bus.pinned_cert_file = other.cert_file;
  Reconciler wrong(settings);
  PassReport refused = wrong.RunPass(1, Trigger::kStart, ApplyMode::kApply);
  CHECK(refused.status.code() == Errc::kRefused);
  CHECK(refused.status.message().find("fingerprint did not match") != std::string::npos);
  CHECK_FALSE(wrong.bus_connected());
  fs::remove_all(certs);
}

TEST_CASE("A pass over a CA-verified TLS bus knows the presented certificate's expiry",
          "[pass][tls][integration]") {
  std::string certs = mesh::testing::MakeTempDir("mesh-tls-certs");
  CertificateSpec ca_spec;
  ca_spec.common_name = "mesh CA";
  ca_spec.is_ca = true;
  const TestCertificate ca = MakeCertificate(ca_spec, certs, "ca");
  CertificateSpec leaf_spec;
  leaf_spec.common_name = "bus";
  leaf_spec.ip_names = {"127.0.0.1"};
  leaf_spec.issuer = &ca;
  leaf_spec.not_after = 20 * 86400;
  const TestCertificate leaf = MakeCertificate(leaf_spec, certs, "bus");
  TlsMesh mesh(leaf);
  Settings settings = mesh.PassSettings();
  settings.bus.ca_file = ca.cert_file;

  Reconciler reconciler(settings);
  PassReport report = reconciler.RunPass(1, Trigger::kStart, ApplyMode::kApply);
  INFO(report.status.ToString());
  REQUIRE(report.converged());
  CHECK(reconciler.bus_certificate_expiry() == ExpiryOf(leaf));
  fs::remove_all(certs);
}

}  // namespace
}  // namespace mesh::reconciler
