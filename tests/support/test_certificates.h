// Test support: X.509 certificates made at test time with the OpenSSL API (EC P-256 keys), written
// as PEM files into a temporary folder. No key is ever committed: each test makes its own.
//
// Thread-safety: plain functions; files go where the caller says.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mesh::testing {

struct TestCertificate {
  std::string cert_file;  // PEM certificate
  std::string key_file;   // PEM private key (mode 0600)
  std::string cert_pem;
  std::string key_pem;
};

struct CertificateSpec {
  std::string common_name;             // empty: an empty subject (names nothing)
  std::vector<std::string> dns_names;  // subjectAltName DNS entries
  std::vector<std::string> ip_names;   // subjectAltName IP entries, e.g. "127.0.0.1"
  bool is_ca = false;                  // basicConstraints CA:TRUE, keyCertSign
  // Validity relative to now, in seconds.
  int64_t not_before = -3600;
  int64_t not_after = 30 * 86400;
  // Signed by this certificate's key (nullptr: self-signed).
  const TestCertificate* issuer = nullptr;
};

// Makes a new key and certificate; writes <dir>/<name>.crt and <dir>/<name>.key.
// Throws std::runtime_error on an OpenSSL failure (a test failure).
TestCertificate MakeCertificate(const CertificateSpec& spec, const std::string& dir,
                                const std::string& name);

// A nats-server `tls { }` block serving `certificate`.
std::string TlsServerConfig(const TestCertificate& certificate);

}  // namespace mesh::testing
