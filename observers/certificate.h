// Facts about an X.509 certificate that the bus's TLS needs: its SHA-256 fingerprint (what a
// pin compares), its validity window (the expiry metric) and its subject (for messages).
// Reads PEM files holding certificates only: never a private key.
//
// Thread-safety: pure functions over values and files.
#pragma once

#include <openssl/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "model/result.h"

namespace mesh::observers {

struct CertificateFacts {
  // SHA-256 of the DER encoding, upper-case hex pairs joined by ':' -- the form that
  // `openssl x509 -noout -fingerprint -sha256` prints, so an operator can compare by eye.
  std::string sha256;
  int64_t not_before_unix = 0;
  int64_t not_after_unix = 0;  // notAfter as Unix seconds: the expiry metric
  std::string subject;         // RFC 2253 one-line form, e.g. "CN=bus"; empty for an empty name
};

// Facts of a parsed certificate (borrowed, not freed).
CertificateFacts FactsOf(X509* certificate);

// The first certificate of a PEM file. Errors name the file, never its content.
Result<CertificateFacts> ReadCertificateFile(const std::string& path);

enum class Validity { kValid, kExpired, kNotYetValid };
Validity ValidityAt(const CertificateFacts& facts, int64_t now_unix);

// "2031-01-02T03:04:05Z" (UTC), for messages.
std::string FormatUnixTime(int64_t unix_seconds);

}  // namespace mesh::observers
