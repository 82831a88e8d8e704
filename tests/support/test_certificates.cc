#include "tests/support/test_certificates.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <memory>
#include <stdexcept>

#include "observers/c_handle.h"
#include "tests/support/nats_server.h"

namespace mesh::testing {
namespace {

using KeyPtr = CHandle<EVP_PKEY, EVP_PKEY_free>;
using X509Ptr = CHandle<X509, X509_free>;
using BioPtr = CHandle<BIO, BIO_free>;
using BignumPtr = CHandle<BIGNUM, BN_free>;
using ExtensionPtr = CHandle<X509_EXTENSION, X509_EXTENSION_free>;

void Check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test certificate: ") + what + " failed");
}

BioPtr MemoryBio(const std::string& bytes) {
  BioPtr bio(BIO_new_mem_buf(bytes.data(), static_cast<int>(bytes.size())));
  Check(bio != nullptr, "BIO_new_mem_buf");
  return bio;
}

std::string Drain(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

void AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  Check(ext != nullptr, "X509V3_EXT_conf_nid");
  Check(X509_add_ext(cert, ext.get(), -1) == 1, "X509_add_ext");
}

}  // namespace

TestCertificate MakeCertificate(const CertificateSpec& spec, const std::string& dir,
                                const std::string& name) {
  KeyPtr key(EVP_EC_gen("P-256"));
  Check(key != nullptr, "EVP_EC_gen");

  X509Ptr issuer_cert;
  KeyPtr issuer_key;
  if (spec.issuer != nullptr) {
    BioPtr cert_bio = MemoryBio(spec.issuer->cert_pem);
    issuer_cert.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
    Check(issuer_cert != nullptr, "reading the issuer's certificate");
    BioPtr key_bio = MemoryBio(spec.issuer->key_pem);
    issuer_key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
    Check(issuer_key != nullptr, "reading the issuer's key");
  }

  X509Ptr cert(X509_new());
  Check(cert != nullptr, "X509_new");
  Check(X509_set_version(cert.get(), X509_VERSION_3) == 1, "X509_set_version");
  BignumPtr serial(BN_new());
  Check(serial && BN_rand(serial.get(), 64, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1, "BN_rand");
  Check(BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr,
        "serial number");
  Check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), spec.not_before) != nullptr, "notBefore");
  Check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), spec.not_after) != nullptr, "notAfter");
  Check(X509_set_pubkey(cert.get(), key.get()) == 1, "X509_set_pubkey");
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (!spec.common_name.empty()) {
    Check(X509_NAME_add_entry_by_txt(
              subject, "CN", MBSTRING_UTF8,
              reinterpret_cast<const unsigned char*>(spec.common_name.c_str()), -1, -1, 0) == 1,
          "subject CN");
  }
  Check(X509_set_issuer_name(cert.get(),
                             issuer_cert ? X509_get_subject_name(issuer_cert.get()) : subject) == 1,
        "issuer name");

  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer_cert ? issuer_cert.get() : cert.get(), cert.get(), nullptr, nullptr,
                 0);
  AddExtension(cert.get(), &ctx, NID_basic_constraints,
               spec.is_ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  AddExtension(cert.get(), &ctx, NID_key_usage,
               spec.is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature");
  AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  if (issuer_cert) AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  std::string names;
  for (const std::string& dns : spec.dns_names)
    names += (names.empty() ? "" : ",") + ("DNS:" + dns);
  for (const std::string& ip : spec.ip_names) names += (names.empty() ? "" : ",") + ("IP:" + ip);
  if (!names.empty()) AddExtension(cert.get(), &ctx, NID_subject_alt_name, names);

  Check(X509_sign(cert.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()) > 0,
        "X509_sign");

  TestCertificate out;
  BioPtr cert_out(BIO_new(BIO_s_mem()));
  Check(cert_out && PEM_write_bio_X509(cert_out.get(), cert.get()) == 1, "PEM_write_bio_X509");
  out.cert_pem = Drain(cert_out.get());
  BioPtr key_out(BIO_new(BIO_s_mem()));
  Check(key_out && PEM_write_bio_PrivateKey(key_out.get(), key.get(), nullptr, nullptr, 0, nullptr,
                                            nullptr) == 1,
        "PEM_write_bio_PrivateKey");
  out.key_pem = Drain(key_out.get());
  out.cert_file = dir + "/" + name + ".crt";
  out.key_file = dir + "/" + name + ".key";
  WriteFile(out.cert_file, out.cert_pem);
  WriteFile(out.key_file, "");
  Check(chmod(out.key_file.c_str(), 0600) == 0, "chmod 0600 on the key file");
  WriteFile(out.key_file, out.key_pem);
  return out;
}

std::string TlsServerConfig(const TestCertificate& certificate) {
  return "tls {\n  cert_file: \"" + certificate.cert_file + "\"\n  key_file: \"" +
         certificate.key_file + "\"\n  timeout: 5\n}\n";
}

}  // namespace mesh::testing
