#include "observers/certificate.h"

#include <date/date.h>
#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <ctime>
#include <memory>

#include "observers/c_handle.h"

namespace mesh::observers {
namespace {

using X509Ptr = CHandle<X509, X509_free>;
using BioPtr = CHandle<BIO, BIO_free>;

int64_t UnixSeconds(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return 0;
  return static_cast<int64_t>(timegm(&tm));
}

std::string Subject(X509* certificate) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) return "";
  if (X509_NAME_print_ex(bio.get(), X509_get_subject_name(certificate), 0, XN_FLAG_RFC2253) < 0) {
    return "";
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return size > 0 ? std::string(data, static_cast<size_t>(size)) : std::string();
}

}  // namespace

CertificateFacts FactsOf(X509* certificate) {
  CertificateFacts facts;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (X509_digest(certificate, EVP_sha256(), digest, &size) == 1) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (unsigned int i = 0; i < size; ++i) {
      if (i > 0) facts.sha256 += ':';
      facts.sha256 += kHex[digest[i] >> 4];
      facts.sha256 += kHex[digest[i] & 0xF];
    }
  }
  facts.not_before_unix = UnixSeconds(X509_get0_notBefore(certificate));
  facts.not_after_unix = UnixSeconds(X509_get0_notAfter(certificate));
  facts.subject = Subject(certificate);
  return facts;
}

Result<CertificateFacts> ReadCertificateFile(const std::string& path) {
  BioPtr file(BIO_new_file(path.c_str(), "r"));
  if (!file) return Status(Errc::kIo, "cannot read the certificate file " + path);
  X509Ptr certificate(PEM_read_bio_X509(file.get(), nullptr, nullptr, nullptr));
  if (!certificate) {
    return Status(Errc::kInvalidArgument, "no PEM certificate in " + path);
  }
  CertificateFacts facts = FactsOf(certificate.get());
  if (facts.sha256.empty())
    return Status(Errc::kInternal, "cannot hash the certificate in " + path);
  return facts;
}

Validity ValidityAt(const CertificateFacts& facts, int64_t now_unix) {
  if (now_unix > facts.not_after_unix) return Validity::kExpired;
  if (now_unix < facts.not_before_unix) return Validity::kNotYetValid;
  return Validity::kValid;
}

std::string FormatUnixTime(int64_t unix_seconds) {
  return date::format("%FT%TZ", date::sys_seconds(std::chrono::seconds(unix_seconds)));
}

}  // namespace mesh::observers
