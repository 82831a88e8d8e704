#include "reconciler/http/listener_tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ssl/context.hpp>
#include <cstring>

#include "model/thread_safety.h"
#include "observers/c_handle.h"
#include "reconciler/base/log.h"

namespace mesh::reconciler {
namespace {

using BioPtr = CHandle<BIO, BIO_free>;
using KeyPtr = CHandle<EVP_PKEY, EVP_PKEY_free>;

namespace ssl = boost::asio::ssl;

struct LoadedContext {
  std::shared_ptr<ssl::context> context;
  observers::CertificateFacts certificate;
};

// OpenSSL's reason for the earliest error queued on this thread (the root cause), and an empty
// queue afterwards. Reasons name what went wrong ("no start line", "No such file or
// directory"), never the bytes read.
std::string TakeOpenSslReason() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  if (ERR_SYSTEM_ERROR(code)) return std::strerror(static_cast<int>(ERR_GET_REASON(code)));
  const char* reason = ERR_reason_error_string(code);
  return reason != nullptr ? reason : "unknown OpenSSL error";
}

// Nobody is there to type a passphrase: an encrypted key fails to load instead of prompting on
// the terminal.
int RefusePassphrase(char*, int, int, void*) {
  return 0;
}

Result<KeyPtr> ReadPrivateKey(const std::string& key_file) {
  BioPtr file(BIO_new_file(key_file.c_str(), "r"));
  if (!file) {
    return Status(Errc::kIo,
                  "--tls-key " + key_file + ": cannot read (" + TakeOpenSslReason() + ")");
  }
  KeyPtr key(PEM_read_bio_PrivateKey(file.get(), nullptr, &RefusePassphrase, nullptr));
  if (!key) {
    return Status(Errc::kInvalidArgument, "--tls-key " + key_file +
                                              ": not an unencrypted PEM private key (" +
                                              TakeOpenSslReason() + ")");
  }
  return key;
}

Result<LoadedContext> BuildContext(const std::string& cert_file, const std::string& key_file) {
  ERR_clear_error();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = context->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Status(Errc::kInternal, "cannot require TLS 1.2: " + TakeOpenSslReason());
  }
  SSL_CTX_set_options(
      native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_default_passwd_cb(native, &RefusePassphrase);
  if (SSL_CTX_use_certificate_chain_file(native, cert_file.c_str()) != 1) {
    const unsigned long code = ERR_peek_error();
    const std::string reason = TakeOpenSslReason();
    return Status(
        ERR_SYSTEM_ERROR(code) ? Errc::kIo : Errc::kInvalidArgument,
        "--tls-cert " + cert_file +
            (ERR_SYSTEM_ERROR(code) ? ": cannot read (" : ": not a PEM certificate chain (") +
            reason + ")");
  }
  X509* leaf = SSL_CTX_get0_certificate(native);
  if (leaf == nullptr) return Status(Errc::kInvalidArgument, "--tls-cert " + cert_file + ": empty");
  Result<KeyPtr> key = ReadPrivateKey(key_file);
  if (!key.ok()) return key.status();
  if (X509_check_private_key(leaf, key->get()) != 1) {
    ERR_clear_error();
    return Status(
        Errc::kInvalidArgument,
        "--tls-key " + key_file + " does not match the certificate of --tls-cert " + cert_file);
  }
  if (SSL_CTX_use_PrivateKey(native, key->get()) != 1 || SSL_CTX_check_private_key(native) != 1) {
    return Status(Errc::kInvalidArgument,
                  "--tls-key " + key_file + ": unusable (" + TakeOpenSslReason() + ")");
  }
  return LoadedContext{std::move(context), observers::FactsOf(leaf)};
}

void LogCertificate(const char* message, const std::string& cert_file,
                    const observers::CertificateFacts& facts) {
  Log(LogLevel::kInfo, 0, message,
      {{"cert_file", cert_file},
       {"subject", facts.subject},
       {"sha256", facts.sha256},
       {"not_after", observers::FormatUnixTime(facts.not_after_unix)}});
}

}  // namespace

bool ListenerTls::FileStamp::operator==(const FileStamp& other) const {
  return device == other.device && inode == other.inode && size == other.size &&
         mtime.tv_sec == other.mtime.tv_sec && mtime.tv_nsec == other.mtime.tv_nsec &&
         ctime.tv_sec == other.ctime.tv_sec && ctime.tv_nsec == other.ctime.tv_nsec;
}

ListenerTls::FileStamp ListenerTls::StampOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return {};
  return {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
}

Result<std::shared_ptr<ListenerTls>> ListenerTls::Load(std::string cert_file,
                                                       std::string key_file) {
  std::shared_ptr<ListenerTls> tls(new ListenerTls(std::move(cert_file), std::move(key_file)));
  MutexLock lock(tls->mutex_);  // not yet shared: taken for the analysis, never contended
  // Stamped before reading: a change made while loading is seen at the next connection.
  tls->cert_stamp_ = StampOf(tls->cert_file_);
  tls->key_stamp_ = StampOf(tls->key_file_);
  Result<LoadedContext> loaded = BuildContext(tls->cert_file_, tls->key_file_);
  if (!loaded.ok()) return loaded.status();
  tls->context_ = std::move(loaded->context);
  tls->certificate_ = std::move(loaded->certificate);
  LogCertificate("TLS certificate loaded", tls->cert_file_, tls->certificate_);
  return tls;
}

std::shared_ptr<boost::asio::ssl::context> ListenerTls::Current() {
  MutexLock lock(mutex_);
  const FileStamp cert_stamp = StampOf(cert_file_);
  const FileStamp key_stamp = StampOf(key_file_);
  if (cert_stamp == cert_stamp_ && key_stamp == key_stamp_) return context_;
  cert_stamp_ = cert_stamp;
  key_stamp_ = key_stamp;
  Result<LoadedContext> loaded = BuildContext(cert_file_, key_file_);
  if (!loaded.ok()) {
    Log(LogLevel::kWarn, 0,
        "TLS certificate reload failed; the previous certificate stays in force",
        {{"error", loaded.status().message()}, {"sha256", certificate_.sha256}});
    return context_;
  }
  context_ = std::move(loaded->context);
  certificate_ = std::move(loaded->certificate);
  LogCertificate("TLS certificate reloaded", cert_file_, certificate_);
  return context_;
}

observers::CertificateFacts ListenerTls::certificate() const {
  MutexLock lock(mutex_);
  return certificate_;
}

}  // namespace mesh::reconciler
