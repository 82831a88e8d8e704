// Whole passes over a TLS bus, as deployed: the reconciler pins the bus's own certificate
// (MESH_BROKER_CERTIFICATE) or trusts a CA file, converges, and reports the certificate's
// expiry (the source of mesh_reconciler_bus_certificate_expiry_timestamp_seconds).
#include <catch2/catch.hpp>

#include "observers/certificate.h"
#include "reconciler/pass/pass.h"
#include "tests/support/pass_fixtures.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_certificates.h"

namespace mesh::reconciler {
namespace {

using mesh::testing::CertificateSpec;
using mesh::testing::MakeCertificate;
using mesh::testing::TempDir;
using mesh::testing::TestCertificate;

// A nats-server serving `served`, whose users file is the reconciler's rendering of the
// example records.
test::LiveMesh TlsMesh(const TestCertificate& served) {
  return test::LiveMesh(test::ExampleRecordsJson(), mesh::testing::TlsServerConfig(served));
}

// The first pass of `reconciler`, applying.
PassReport FirstPass(Reconciler& reconciler) {
  return reconciler.RunPass(1, Trigger::kStart, ApplyMode::kApply);
}

int64_t ExpiryOf(const TestCertificate& certificate) {
  auto facts = observers::ReadCertificateFile(certificate.cert_file);
  REQUIRE(facts.ok());
  return facts->not_after_unix;
}

TEST_CASE("A pass over a pinned TLS bus converges and knows the certificate's expiry",
          "[pass][tls][integration][server]") {
  const TempDir certs("mesh-tls-certs");
  CertificateSpec spec;  // self-signed, naming nothing
  spec.not_after = 50 * 86400;
  const TestCertificate pin = MakeCertificate(spec, certs.path, "broker");
  const test::LiveMesh mesh = TlsMesh(pin);
  Settings settings = mesh.PassSettings();
  settings.bus.pinned_cert_file = pin.cert_file;

  Reconciler reconciler(settings);
  PassReport report = FirstPass(reconciler);
  INFO(report.status.ToString());
  CHECK(report.status.ok());
  CHECK(report.converged());
  CHECK(reconciler.bus_connected());
  CHECK(reconciler.bus_certificate_expiry() == ExpiryOf(pin));

  // Another certificate pinned: the pass fails, saying so, and connects to nothing.
  const TestCertificate other = MakeCertificate(spec, certs.path, "other");
  settings.bus.pinned_cert_file = other.cert_file;
  Reconciler wrong(settings);
  PassReport refused = FirstPass(wrong);
  CHECK(refused.status.code() == Errc::kRefused);
  CHECK(refused.status.message().find("fingerprint did not match") != std::string::npos);
  CHECK_FALSE(wrong.bus_connected());
}

TEST_CASE("A pass over a CA-verified TLS bus knows the presented certificate's expiry",
          "[pass][tls][integration][server]") {
  const TempDir certs("mesh-tls-certs");
  CertificateSpec ca_spec;
  ca_spec.common_name = "mesh CA";
  ca_spec.is_ca = true;
  const TestCertificate ca = MakeCertificate(ca_spec, certs.path, "ca");
  CertificateSpec leaf_spec;
  leaf_spec.common_name = "bus";
  leaf_spec.ip_names = {"127.0.0.1"};
  leaf_spec.issuer = &ca;
  leaf_spec.not_after = 20 * 86400;
  const TestCertificate leaf = MakeCertificate(leaf_spec, certs.path, "bus");
  const test::LiveMesh mesh = TlsMesh(leaf);
  Settings settings = mesh.PassSettings();
  settings.bus.ca_file = ca.cert_file;

  Reconciler reconciler(settings);
  PassReport report = FirstPass(reconciler);
  INFO(report.status.ToString());
  REQUIRE(report.converged());
  CHECK(reconciler.bus_certificate_expiry() == ExpiryOf(leaf));
}

}  // namespace
}  // namespace mesh::reconciler
