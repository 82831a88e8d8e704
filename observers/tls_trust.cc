#include "observers/tls_trust.h"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include <rapidjson/document.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <ctime>

#include "model/json_read.h"
#include "model/thread_safety.h"
#include "observers/c_handle.h"
#include "observers/nats_error.h"
#include "observers/server_version.h"
#include "observers/url.h"

namespace mesh::observers {
namespace {

using X509Ptr = CHandle<X509, X509_free>;
using StorePtr = CHandle<X509_STORE, X509_STORE_free>;

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;

constexpr size_t kMaxInfoBytes = 64 * 1024;  // a NATS INFO line is a few hundred bytes

// Not a CHandle: OPENSSL_free is a macro (it passes the caller's file and line).
struct OpenSslStringDeleter {
  void operator()(char* p) const { OPENSSL_free(p); }
};

int64_t NowUnix() {
  return static_cast<int64_t>(std::time(nullptr));
}

// "expired at ..." / "not valid before ..." for a certificate outside its window; "" inside.
std::string ValidityProblem(const CertificateFacts& facts, int64_t now_unix) {
  switch (ValidityAt(facts, now_unix)) {
    case Validity::kExpired:
      return "expired at " + FormatUnixTime(facts.not_after_unix);
    case Validity::kNotYetValid:
      return "is not valid before " + FormatUnixTime(facts.not_before_unix);
    case Validity::kValid:
      break;
  }
  return "";
}

// ---- The check installed into cnats' SSL_CTX. ----

// Owned by the SSL_CTX (ex_data, freed with it): cnats may still handshake on its reconnect
// thread while the BusConnection is being destroyed, so the check must not live in it.
struct PeerCheck {
  TlsMode mode = TlsMode::kPlain;
  std::string pin_sha256;  // kPinned
  std::shared_ptr<TlsObservations> observations;
};

// Captures the SSL_CTX that cnats creates on this thread while the capture is armed.
thread_local bool capture_armed = false;
thread_local std::vector<SSL_CTX*>* captured = nullptr;

void OnNewContext(void* parent, void*, CRYPTO_EX_DATA*, int, long, void*) {
  if (capture_armed && captured != nullptr) captured->push_back(static_cast<SSL_CTX*>(parent));
}
void OnFreeContext(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  delete static_cast<PeerCheck*>(ptr);
}
// Registered once, before cnats creates any context for us; -1 when OpenSSL refused.
int PeerCheckIndex() {
  static const int index = CRYPTO_get_ex_new_index(CRYPTO_EX_INDEX_SSL_CTX, 0, nullptr,
                                                   OnNewContext, nullptr, OnFreeContext);
  return index;
}

int Reject(X509_STORE_CTX* store_ctx, const PeerCheck& check, int error, const std::string& why) {
  X509_STORE_CTX_set_error(store_ctx, error);
  check.observations->RecordRejection(why);
  return 0;
}

// kPinned: exactly the pinned certificate, inside its validity window. Nothing else counts:
// not its names, not its issuer, not the system's CAs.
int VerifyPinned(X509_STORE_CTX* store_ctx, void* arg) {
  const PeerCheck& check = *static_cast<const PeerCheck*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(store_ctx);
  if (leaf == nullptr) return Reject(store_ctx, check, X509_V_ERR_UNSPECIFIED, "no certificate");
  const CertificateFacts facts = FactsOf(leaf);
  check.observations->RecordPresented(facts);
  if (facts.sha256 != check.pin_sha256) {
    return Reject(store_ctx, check, X509_V_ERR_CERT_REJECTED,
                  "SHA-256 fingerprint did not match: expected " + check.pin_sha256 +
                      ", presented " + facts.sha256);
  }
  const int64_t now = NowUnix();
  if (const std::string problem = ValidityProblem(facts, now); !problem.empty()) {
    const bool expired = ValidityAt(facts, now) == Validity::kExpired;
    return Reject(store_ctx, check,
                  expired ? X509_V_ERR_CERT_HAS_EXPIRED : X509_V_ERR_CERT_NOT_YET_VALID,
                  "the pinned certificate " + problem);
  }
  X509_STORE_CTX_set_error(store_ctx, X509_V_OK);
  return 1;
}

// The host (or IP address) the handshake is checked against: cnats sets it on each SSL from
// the URL being connected (Debian's libnats is built with NATS_FORCE_HOST_VERIFICATION) or from
// natsOptions_SetExpectedHostname. Empty when neither did.
std::string ExpectedHost(X509_STORE_CTX* store_ctx) {
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(store_ctx);
  if (const char* host = X509_VERIFY_PARAM_get0_host(param, 0); host != nullptr) return host;
  std::unique_ptr<char, OpenSslStringDeleter> ip(X509_VERIFY_PARAM_get1_ip_asc(param));
  return ip ? std::string(ip.get()) : std::string();
}

// kCaFile: OpenSSL's own chain and name verification, against the CA file's store only
// (installed as the context's verify store, so the system's CAs play no part). Fails closed
// when no host name was set to check.
int VerifyWithCa(X509_STORE_CTX* store_ctx, void* arg) {
  const PeerCheck& check = *static_cast<const PeerCheck*>(arg);
  X509* leaf = X509_STORE_CTX_get0_cert(store_ctx);
  if (leaf == nullptr) return Reject(store_ctx, check, X509_V_ERR_UNSPECIFIED, "no certificate");
  check.observations->RecordPresented(FactsOf(leaf));
  const std::string host = ExpectedHost(store_ctx);
  if (host.empty()) {
    return Reject(store_ctx, check, X509_V_ERR_HOSTNAME_MISMATCH,
                  "no host name to check the certificate against");
  }
  if (X509_verify_cert(store_ctx) == 1) return 1;
  const int error = X509_STORE_CTX_get_error(store_ctx);
  check.observations->RecordRejection(std::string(X509_verify_cert_error_string(error)) +
                                      " (checked against the CA file, for " + host + ")");
  return 0;
}

}  // namespace

TlsMode TlsModeOf(const BusSettings& settings) {
  if (!settings.pinned_cert_file.empty()) return TlsMode::kPinned;
  if (!settings.ca_file.empty()) return TlsMode::kCaFile;
  return TlsMode::kPlain;
}

void TlsObservations::RecordPresented(const CertificateFacts& facts) {
  MutexLock lock(mutex_);
  presented_ = facts;
}

void TlsObservations::RecordRejection(const std::string& why) {
  MutexLock lock(mutex_);
  rejection_ = why;
}

std::optional<CertificateFacts> TlsObservations::presented() const {
  MutexLock lock(mutex_);
  return presented_;
}

std::string TlsObservations::rejection() const {
  MutexLock lock(mutex_);
  return rejection_;
}

Result<std::shared_ptr<const TlsObservations>> InstallTlsTrust(natsOptions* options,
                                                               const BusSettings& settings) {
  auto check = std::make_unique<PeerCheck>();
  check->mode = TlsModeOf(settings);
  check->observations = std::make_shared<TlsObservations>();
  StorePtr ca_store;
  switch (check->mode) {
    case TlsMode::kPlain:
      return Status(Errc::kInvalidArgument, "no TLS trust configured");
    case TlsMode::kPinned: {
      Result<CertificateFacts> pin = ReadCertificateFile(settings.pinned_cert_file);
      if (!pin.ok()) return pin.status();
      check->pin_sha256 = pin->sha256;
      break;
    }
    case TlsMode::kCaFile: {
      ca_store.reset(X509_STORE_new());
      if (!ca_store) return Status(Errc::kInternal, "cannot create a certificate store");
      if (X509_STORE_load_file(ca_store.get(), settings.ca_file.c_str()) != 1) {
        return Status(Errc::kInvalidArgument,
                      "no CA certificate could be read from " + settings.ca_file);
      }
      break;
    }
  }
  const int index = PeerCheckIndex();
  if (index < 0) return Status(Errc::kInternal, "OpenSSL refused an ex_data index");

  // cnats creates its SSL_CTX synchronously, on this thread, inside natsOptions_SetSecure.
  std::vector<SSL_CTX*> contexts;
  captured = &contexts;
  capture_armed = true;
  const natsStatus s = natsOptions_SetSecure(options, true);
  capture_armed = false;
  captured = nullptr;
  if (s != NATS_OK) return NatsError(s, "enable TLS");
  if (contexts.size() != 1) {
    // Fail closed: without our check cnats would trust the system's CAs for any name.
    return Status(Errc::kInternal, "cannot install the certificate check: cnats created " +
                                       std::to_string(contexts.size()) +
                                       " TLS contexts for one connection");
  }
  SSL_CTX* context = contexts.front();
  SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
  if (ca_store && SSL_CTX_set1_verify_cert_store(context, ca_store.get()) != 1) {
    return Status(Errc::kInternal, "cannot install the CA file's certificate store");
  }
  std::shared_ptr<const TlsObservations> observations = check->observations;
  PeerCheck* owned = check.get();
  if (SSL_CTX_set_ex_data(context, index, owned) != 1) {
    return Status(Errc::kInternal, "cannot attach the certificate check");
  }
  check.release();  // the SSL_CTX owns it now (OnFreeContext)
  SSL_CTX_set_cert_verify_callback(
      context, owned->mode == TlsMode::kPinned ? VerifyPinned : VerifyWithCa, owned);
  return observations;
}

Result<CertificateFacts> FetchPresentedCertificate(const std::string& url,
                                                   std::chrono::milliseconds timeout) {
  std::optional<ServerAddress> address = ParseServerAddress(url);
  if (!address) return Status(Errc::kInvalidArgument, "not a bus address: " + UrlForMessages(url));
  const std::string& where = address->url;

  net::io_context ioc;
  ssl::context tls(ssl::context::tls_client);
  tls.set_verify_mode(ssl::verify_none);  // we only look: the fingerprint decides
  beast::ssl_stream<beast::tcp_stream> stream(ioc, tls);
  tcp::resolver resolver(ioc);
  // The same server name cnats sends, so the server answers both alike.
  SSL_set_tlsext_host_name(stream.native_handle(), address->host.c_str());
  std::string info;
  std::optional<Status> outcome;
  auto fail = [&](Errc code, const std::string& what) {
    outcome = Status(code, where + ": " + what);
  };
  auto failed = [&](const char* stage, const beast::error_code& ec) {
    fail(ec == beast::error::timeout ? Errc::kTimeout : Errc::kUnavailable,
         std::string(stage) + ": " + ec.message());
  };

  beast::get_lowest_layer(stream).expires_after(timeout);
  resolver.async_resolve(
      address->host, address->port,
      [&](const beast::error_code& ec, const tcp::resolver::results_type& endpoints) {
        if (ec) return failed("resolve", ec);
        beast::get_lowest_layer(stream).async_connect(endpoints, [&](const beast::error_code& ec,
                                                                     const tcp::endpoint&) {
          if (ec) return failed("connect", ec);
          net::async_read_until(
              beast::get_lowest_layer(stream), net::dynamic_buffer(info, kMaxInfoBytes), "\r\n",
              [&](const beast::error_code& ec, size_t line_size) {
                if (ec) return failed("read INFO", ec);
                std::optional<rapidjson::Document> json =
                    ParseInfo(std::string_view(info).substr(0, line_size));
                if (!json) return fail(Errc::kRefused, "did not greet like a NATS server");
                if (!model::json::Bool(*json, "tls_required", false) &&
                    !model::json::Bool(*json, "tls_available", false)) {
                  return fail(Errc::kRefused, "the server does not offer TLS");
                }
                stream.async_handshake(ssl::stream_base::client, [&](const beast::error_code& ec) {
                  if (ec == beast::error::timeout) return failed("TLS handshake", ec);
                  if (ec) return fail(Errc::kIo, "TLS handshake: " + ec.message());
                  outcome = Status::Ok();
                });
              });
        });
      });
  ioc.run_for(timeout + std::chrono::milliseconds(100));
  if (!outcome) return Status(Errc::kTimeout, where + ": no answer in time");
  if (!outcome->ok()) return *outcome;
  X509Ptr presented(SSL_get1_peer_certificate(stream.native_handle()));
  if (!presented) return Status(Errc::kRefused, where + ": presented no certificate");
  return FactsOf(presented.get());
  // `stream` closes the socket here: CONNECT, and with it any credential, is never sent.
}

Status PreflightPinned(const std::vector<std::string>& urls, const std::string& pin_file,
                       std::chrono::milliseconds timeout) {
  Result<CertificateFacts> pin = ReadCertificateFile(pin_file);
  if (!pin.ok()) {
    return Status(pin.status().code(),
                  "pinned certificate (MESH_BROKER_CERTIFICATE): " + pin.status().message());
  }
  if (const std::string problem = ValidityProblem(*pin, NowUnix()); !problem.empty()) {
    return Status(Errc::kRefused, "the pinned certificate " + pin_file + " (SHA-256 " +
                                      pin->sha256 + ") " + problem +
                                      ": refusing to connect with it");
  }
  std::optional<Status> unreachable;
  int reachable = 0;
  for (const std::string& url : urls) {
    Result<CertificateFacts> presented = FetchPresentedCertificate(url, timeout);
    if (!presented.ok()) {
      const Errc code = presented.status().code();
      if (code == Errc::kUnavailable || code == Errc::kTimeout) {
        unreachable = presented.status();
        continue;  // cnats will not get through either; another server may
      }
      return presented.status();
    }
    ++reachable;
    if (presented->sha256 != pin->sha256) {
      const std::optional<ServerAddress> address = ParseServerAddress(url);
      return Status(
          Errc::kRefused,
          (address ? address->url : UrlForMessages(url)) +
              " presented a certificate other than the pinned one " + pin_file +
              " (MESH_BROKER_CERTIFICATE): SHA-256 fingerprint did not match: "
              "expected " +
              pin->sha256 + ", presented " + presented->sha256 +
              (presented->subject.empty() ? "" : " (subject " + presented->subject + ")") +
              "; refused before sending any credential");
    }
  }
  if (reachable > 0) return Status::Ok();
  return unreachable ? *unreachable : Status(Errc::kInvalidArgument, "no bus address configured");
}

}  // namespace mesh::observers
