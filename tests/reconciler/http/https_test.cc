// The HTTP listener over TLS (--tls-cert/--tls-key): verification by the client, plain HTTP on
// the TLS port, certificate rotation (good and broken replacements), the handshake deadline, the
// listener's limits on the TLS path, and the on-call CLI against an HTTPS daemon.
//
// Certificates are made at test time (tests/support/test_certificates.h: a CA, and server
// certificates for IP 127.0.0.1 that it signs) in a temporary folder; none is committed.
#include <openssl/ssl.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/ssl.hpp>
#include <catch2/catch.hpp>
#include <filesystem>

#include "observers/certificate.h"
#include "observers/http_client.h"
#include "reconciler/http/http_server.h"
#include "reconciler/http/listener_tls.h"
#include "tests/support/daemon_support.h"
#include "tests/support/http_fakes.h"
#include "tests/support/nats_server.h"
#include "tests/support/raw_client.h"
#include "tests/support/test_certificates.h"

namespace mesh::reconciler::test {
namespace {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace ssl = net::ssl;
using mesh::testing::CertificateSpec;
using mesh::testing::MakeCertificate;
using mesh::testing::TestCertificate;
using mesh::testing::WaitFor;
using std::chrono::milliseconds;

constexpr auto kClientTimeout = std::chrono::seconds(5);

// Replaces `path` atomically (a rename), as Kubernetes and cert-manager do.
void ReplaceFile(const std::string& path, const std::string& bytes) {
  mesh::testing::WriteFile(path + ".new", bytes);
  std::filesystem::rename(path + ".new", path);
}

std::string Fingerprint(const TestCertificate& certificate) {
  Result<observers::CertificateFacts> facts = observers::ReadCertificateFile(certificate.cert_file);
  REQUIRE(facts.ok());
  return facts->sha256;
}

// A CA, two server certificates it signed for 127.0.0.1, a certificate from another CA, and the
// listener's files (tls.crt, tls.key) holding the first server pair.
struct Pki {
  Pki() : dir(mesh::testing::MakeTempDir("mesh-https")) {
    ca = MakeCertificate({"test CA", {}, {}, true}, dir, "ca");
    CertificateSpec server{"mesh-reconciler", {}, {"127.0.0.1"}};
    server.issuer = &ca;
    first = MakeCertificate(server, dir, "first");
    second = MakeCertificate(server, dir, "second");
    other_ca = MakeCertificate({"other CA", {}, {}, true}, dir, "other-ca");
    cert_file = dir + "/tls.crt";
    key_file = dir + "/tls.key";
    Install(first);
  }
  ~Pki() {
    if (std::uncaught_exceptions() == 0) std::filesystem::remove_all(dir);
  }
  void Install(const TestCertificate& pair) const { Install(pair.cert_pem, pair.key_pem); }
  void Install(const std::string& cert_pem, const std::string& key_pem) const {
    ReplaceFile(key_file, key_pem);
    ReplaceFile(cert_file, cert_pem);
  }

  std::string dir;
  TestCertificate ca, first, second, other_ca;
  std::string cert_file, key_file;
};

std::shared_ptr<ListenerTls> LoadTls(const Pki& pki) {
  Result<std::shared_ptr<ListenerTls>> tls = ListenerTls::Load(pki.cert_file, pki.key_file);
  INFO(tls.status().ToString());
  REQUIRE(tls.ok());
  return *tls;
}

std::unique_ptr<HttpServer> StartTlsServer(const HttpState& state, const Pki& pki,
                                           HttpServerOptions options = {}) {
  options.tls = LoadTls(pki);
  Result<std::unique_ptr<HttpServer>> server =
      HttpServer::Start({"127.0.0.1", 0, true}, state, options);
  INFO(server.status().ToString());
  REQUIRE(server.ok());
  return std::move(*server);
}

std::string Url(const HttpServer& server, const std::string& path,
                const std::string& host = "127.0.0.1") {
  return "https://" + host + ":" + std::to_string(server.port()) + path;
}

Result<observers::HttpResponse> Https(const std::string& url, const std::string& ca_file,
                                      const std::string& method = "GET",
                                      std::vector<std::pair<std::string, std::string>> headers = {},
                                      std::string body = "") {
  observers::HttpCall call;
  call.method = method;
  call.url = url;
  call.ca_file = ca_file;
  call.headers = std::move(headers);
  call.body = std::move(body);
  return observers::HttpSend(call, kClientTimeout);
}

// A TLS client that verifies the listener against a CA and the address 127.0.0.1, with a
// deadline on every step; it tells which certificate was presented, and holds the connection.
class TlsClient {
 public:
  explicit TlsClient(const std::string& ca_file) {
    context_.load_verify_file(ca_file);
    context_.set_verify_mode(ssl::verify_peer);
    stream_.emplace(ioc_, context_);
    REQUIRE(X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream_->native_handle()), "127.0.0.1") ==
            1);
  }

  // TCP, then the TLS handshake: the error, if any.
  beast::error_code Handshake(int port) {
    beast::error_code result = net::error::timed_out;
    auto& tcp = beast::get_lowest_layer(*stream_);
    tcp.expires_after(kClientTimeout);
    const net::ip::tcp::endpoint server(net::ip::make_address("127.0.0.1"),
                                        static_cast<unsigned short>(port));
    tcp.async_connect(server, [&](beast::error_code ec) {
      if (ec) {
        result = ec;
        return;
      }
      stream_->async_handshake(ssl::stream_base::client,
                               [&](beast::error_code handshake_ec) { result = handshake_ec; });
    });
    Run();
    return result;
  }

  // The certificate the server presented (after a successful handshake).
  std::string PresentedFingerprint() {
    X509* peer = SSL_get0_peer_certificate(stream_->native_handle());
    REQUIRE(peer != nullptr);
    return observers::FactsOf(peer).sha256;
  }

  // Sends nothing and waits for the server to end the connection: how long that took, or
  // nullopt when it was still open after kClientTimeout.
  std::optional<milliseconds> WaitClosedByServer() {
    const auto start = std::chrono::steady_clock::now();
    bool closed = false;
    char byte = 0;
    beast::get_lowest_layer(*stream_).expires_after(kClientTimeout);
    stream_->async_read_some(net::buffer(&byte, 1), [&](beast::error_code ec, size_t) {
      closed = ec && ec != beast::error::timeout;
    });
    Run();
    if (!closed) return std::nullopt;
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
  }

 private:
  void Run() {
    ioc_.restart();
    ioc_.run_for(kClientTimeout + std::chrono::seconds(1));
  }

  net::io_context ioc_;
  ssl::context context_{ssl::context::tls_client};
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
};

// The fingerprint of the certificate a new connection is presented.
std::string Presented(const HttpServer& server, const Pki& pki) {
  TlsClient client(pki.ca.cert_file);
  const beast::error_code ec = client.Handshake(server.port());
  INFO(ec.message());
  REQUIRE_FALSE(ec);
  return client.PresentedFingerprint();
}

void RequireServes(const HttpServer& server, const Pki& pki) {
  Result<observers::HttpResponse> metrics = Https(Url(server, "/metrics"), pki.ca.cert_file);
  INFO(metrics.status().ToString());
  REQUIRE(metrics.ok());
  CHECK(metrics->status == 200);
  CHECK(metrics->body == "mesh_reconciler_bus_connected 1\n");
}

TEST_CASE("An HTTPS listener serves clients that trust its CA, and only them", "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;
  auto server = StartTlsServer(state, pki);
  RequireServes(*server, pki);

  struct Case {
    std::string url;
    std::string ca_file;
    std::string why;
  };
  const std::vector<Case> refused = {
      {Url(*server, "/metrics"), pki.other_ca.cert_file, "unable to get local issuer certificate"},
      {Url(*server, "/metrics"), "", "unable to get local issuer certificate"},  // system CAs
      {Url(*server, "/metrics", "localhost"), pki.ca.cert_file, "mismatch"},     // names 127.0.0.1
  };
  for (const Case& c : refused) {
    INFO(c.url << " trusting \"" << c.ca_file << "\"");
    Result<observers::HttpResponse> reply = Https(c.url, c.ca_file);
    REQUIRE_FALSE(reply.ok());
    CHECK(reply.status().message().find("TLS handshake") != std::string::npos);
    CHECK(reply.status().message().find(c.why) != std::string::npos);
  }
  Result<observers::HttpResponse> missing_ca = Https(Url(*server, "/metrics"), pki.dir + "/none");
  REQUIRE_FALSE(missing_ca.ok());
  CHECK(missing_ca.status().message().find("cannot read the CA file") != std::string::npos);
  RequireServes(*server, pki);
}

TEST_CASE("The listener's TLS context speaks TLS 1.2 or later only", "[http][tls]") {
  Pki pki;
  std::shared_ptr<ListenerTls> tls = LoadTls(pki);
  CHECK(SSL_CTX_get_min_proto_version(tls->Current()->native_handle()) == TLS1_2_VERSION);
  CHECK(tls->certificate().sha256 == Fingerprint(pki.first));
  CHECK(tls->certificate().subject == "CN=mesh-reconciler");
}

TEST_CASE("Plain HTTP to the TLS port gets a plaintext 400 and the server goes on", "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;
  auto server = StartTlsServer(state, pki);
  {
    RawClient plain(server->port());
    plain.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    const std::string answer = plain.ReadUntilClosed();
    CHECK(StatusOf(answer) == 400);
    CHECK(answer.find("use https://") != std::string::npos);
    CHECK(plain.closed());
  }
  {
    RawClient garbage(server->port());
    garbage.Send(std::string("\x01\x02 not TLS, not HTTP\r\n\r\n", 24));
    CHECK(garbage.ReadUntilClosed().empty());
    CHECK(garbage.closed());
  }
  RequireServes(*server, pki);
}

TEST_CASE("A rotated certificate is presented from the next connection on", "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;
  auto server = StartTlsServer(state, pki);
  CHECK(Presented(*server, pki) == Fingerprint(pki.first));
  CHECK(Presented(*server, pki) == Fingerprint(pki.first));

  pki.Install(pki.second);
  CHECK(Presented(*server, pki) == Fingerprint(pki.second));
  RequireServes(*server, pki);

  pki.Install(pki.first);
  CHECK(Presented(*server, pki) == Fingerprint(pki.first));
}

TEST_CASE("A broken replacement keeps the previous certificate in force", "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;
  auto server = StartTlsServer(state, pki);
  const std::string first = Fingerprint(pki.first);

  SECTION("not PEM") {
    pki.Install("not a certificate\n", pki.first.key_pem);
  }
  SECTION("a key that does not match the certificate") {
    pki.Install(pki.second.cert_pem, pki.first.key_pem);
  }
  SECTION("an empty key file") {
    pki.Install(pki.first.cert_pem, "");
  }
  SECTION("the certificate file gone") {
    std::filesystem::remove(pki.cert_file);
  }

  CHECK(Presented(*server, pki) == first);
  RequireServes(*server, pki);
  CHECK(Presented(*server, pki) == first);

  // Fixed files are picked up again.
  pki.Install(pki.second);
  CHECK(Presented(*server, pki) == Fingerprint(pki.second));
}

TEST_CASE("ListenerTls swaps its context only for a usable change", "[http][tls]") {
  Pki pki;
  std::shared_ptr<ListenerTls> tls = LoadTls(pki);
  const auto initial = tls->Current();
  CHECK(tls->Current() == initial);  // unchanged files: the same context

  pki.Install(pki.second.cert_pem, pki.first.key_pem);
  CHECK(tls->Current() == initial);
  CHECK(tls->certificate().sha256 == Fingerprint(pki.first));

  pki.Install(pki.second);
  const auto rotated = tls->Current();
  CHECK(rotated != initial);
  CHECK(tls->certificate().sha256 == Fingerprint(pki.second));
  CHECK(tls->Current() == rotated);
}

TEST_CASE("Unusable TLS files are refused at load with a message that names them", "[http][tls]") {
  Pki pki;
  const std::string encrypted_key = pki.dir + "/encrypted.key";
  const std::string command = "openssl pkey -in '" + pki.first.key_file +
                              "' -aes256 -passout pass:secret -out '" + encrypted_key + "'";
  REQUIRE(std::system(command.c_str()) == 0);
  struct Case {
    std::string cert_file;
    std::string key_file;
    std::string message;
  };
  const std::vector<Case> cases = {
      {pki.dir + "/absent.crt", pki.first.key_file,
       "--tls-cert " + pki.dir + "/absent.crt: cannot read (No such file or directory)"},
      {pki.first.cert_file, pki.dir + "/absent.key",
       "--tls-key " + pki.dir + "/absent.key: cannot read (No such file or directory)"},
      {pki.first.key_file, pki.first.key_file, "not a PEM certificate chain (no start line)"},
      {pki.first.cert_file, pki.first.cert_file, "not an unencrypted PEM private key"},
      {pki.first.cert_file, encrypted_key, "not an unencrypted PEM private key"},
      {pki.first.cert_file, pki.second.key_file,
       "--tls-key " + pki.second.key_file + " does not match the certificate of --tls-cert " +
           pki.first.cert_file},
  };
  for (const Case& c : cases) {
    INFO(c.cert_file << " + " << c.key_file);
    Result<std::shared_ptr<ListenerTls>> tls = ListenerTls::Load(c.cert_file, c.key_file);
    REQUIRE_FALSE(tls.ok());
    CHECK(tls.status().message().find(c.message) != std::string::npos);
    CHECK(tls.status().message().find("PRIVATE KEY") == std::string::npos);
    CHECK(tls.status().message().find("BEGIN") == std::string::npos);
  }
}

TEST_CASE("A client that never completes the handshake is cut off while others are served",
          "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;
  HttpServerOptions options;
  options.handshake_timeout = milliseconds(300);
  auto server = StartTlsServer(state, pki, options);

  const auto start = std::chrono::steady_clock::now();
  RawClient silent(server->port());
  RawClient partial(server->port());
  partial.Send(std::string("\x16\x03\x01\x00\xc8", 5));  // a record header, then nothing
  for (int i = 0; i < 5; ++i) RequireServes(*server, pki);
  for (RawClient* stalled : {&silent, &partial}) {
    CHECK(stalled->ReadUntilClosed().empty());
    CHECK(stalled->closed());
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= milliseconds(250));
  CHECK(waited < kClientTimeout);
}

TEST_CASE("The listener's limits hold on the TLS path", "[http][tls]") {
  Pki pki;
  mesh::testing::FakeHttpState state;

  SECTION("a silent client after the handshake is cut off by the read timeout") {
    HttpServerOptions options;
    options.read_timeout = milliseconds(300);
    auto server = StartTlsServer(state, pki, options);
    TlsClient idle(pki.ca.cert_file);
    REQUIRE_FALSE(idle.Handshake(server->port()));
    std::optional<milliseconds> waited = idle.WaitClosedByServer();
    REQUIRE(waited.has_value());
    CHECK(*waited >= milliseconds(250));
    RequireServes(*server, pki);
  }
  SECTION("413 for a body over the limit, 431 for headers over the limit") {
    auto server = StartTlsServer(state, pki);
    const std::string token = std::string("Bearer ") + mesh::testing::kFakeAdminToken;
    Result<observers::HttpResponse> large_body =
        Https(Url(*server, "/reconcile"), pki.ca.cert_file, "POST", {{"Authorization", token}},
              std::string(100 * 1024, 'x'));
    INFO(large_body.status().ToString());
    REQUIRE(large_body.ok());
    CHECK(large_body->status == 413);
    Result<observers::HttpResponse> large_header =
        Https(Url(*server, "/metrics"), pki.ca.cert_file, "GET",
              {{"X-Filler", std::string(20 * 1024, 'y')}});
    REQUIRE(large_header.ok());
    CHECK(large_header->status == 431);
    CHECK(state.forced_ == 0);
    RequireServes(*server, pki);
  }
  SECTION("at the cap, the connection idle longest makes room for a new one") {
    HttpServerOptions options;
    options.max_connections = 2;
    auto server = StartTlsServer(state, pki, options);
    auto a = std::make_unique<TlsClient>(pki.ca.cert_file);
    auto b = std::make_unique<TlsClient>(pki.ca.cert_file);
    REQUIRE_FALSE(a->Handshake(server->port()));
    REQUIRE_FALSE(b->Handshake(server->port()));
    // Both sent no request: the probe evicts `a` (idle longest) and is answered.
    Result<observers::HttpResponse> probe = Https(Url(*server, "/healthz"), pki.ca.cert_file);
    REQUIRE(probe.ok());
    CHECK(probe->status == 200);
    CHECK(a->WaitClosedByServer().has_value());
  }
}

// The daemon binary serving HTTPS, driven by the on-call CLI.
TEST_CASE("hold and release reach an HTTPS daemon that --ca-file trusts", "[http][tls]") {
  Pki pki;
  const std::string records = pki.dir + "/records.json";
  mesh::testing::WriteFile(records,
                           R"({"version": 1, "mesh": "demo",
                               "controller": {"user": "mesh-controller", "password": "pw"}})");
  const std::string token_file = pki.dir + "/admin.token";
  mesh::testing::WriteFile(token_file, "https-test-token-0e6b2d94c7a1f358\n");
  const std::string bus = "nats://127.0.0.1:" + std::to_string(mesh::testing::FreePort());
  auto daemon = DaemonProcess::Start(
      {"--records", records, "--bus", bus, "--token-file", token_file, "--tls-cert", pki.cert_file,
       "--tls-key", pki.key_file, "--interval", "1h"},
      {}, pki.ca.cert_file);
  INFO(daemon->log());
  REQUIRE(daemon->url().rfind("https://127.0.0.1:", 0) == 0);
  auto metrics = daemon->Get("/metrics");
  REQUIRE(metrics.ok());
  CHECK(metrics->status == 200);

  const std::vector<std::string> remote = {"--remote", daemon->url(), "--token-file", token_file};
  auto cli = [&](const std::string& command, std::vector<std::string> extra) {
    std::vector<std::string> args = {command};
    args.insert(args.end(), remote.begin(), remote.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return RunCli(args, std::chrono::seconds(30));
  };
  CliResult held = cli("hold", {"--ca-file", pki.ca.cert_file, "--for", "10m"});
  INFO(held.output);
  CHECK(held.exit_code == 0);
  CHECK(held.output.find("held until") != std::string::npos);

  // Verification is never skipped: the system's CAs, or another CA, do not vouch for it.
  CliResult untrusted = cli("release", {});
  INFO(untrusted.output);
  CHECK(untrusted.exit_code == 1);
  CHECK(untrusted.output.find("certificate verify failed") != std::string::npos);
  CliResult other = cli("release", {"--ca-file", pki.other_ca.cert_file});
  CHECK(other.exit_code == 1);

  CliResult released = cli("release", {"--ca-file", pki.ca.cert_file});
  INFO(released.output);
  CHECK(released.exit_code == 0);
  CHECK(released.output.find("released") != std::string::npos);

  // A rotation reaches the daemon too.
  pki.Install(pki.second);
  TlsClient client(pki.ca.cert_file);
  REQUIRE_FALSE(client.Handshake(daemon->port()));
  CHECK(client.PresentedFingerprint() == Fingerprint(pki.second));

  CHECK(daemon->Terminate(std::chrono::seconds(10)) == 0);
  const std::string log = mesh::testing::ReadFile(daemon->log_path());
  CHECK(log.find("serving HTTPS") != std::string::npos);
  CHECK(log.find("TLS certificate reloaded") != std::string::npos);
  CHECK(log.find("PRIVATE KEY") == std::string::npos);
}

TEST_CASE("run refuses half a TLS configuration and unusable TLS files", "[http][tls]") {
  Pki pki;
  // A bus that is not there: the TLS files are checked at start, before any connection.
  CliResult half =
      RunCli({"run", "--records", pki.dir + "/records.json", "--bus", "nats://127.0.0.1:1",
              "--tls-cert", pki.cert_file, "--listen", "127.0.0.1:0"});
  CHECK(half.exit_code == 64);
  CHECK(half.output.find("--tls-cert and --tls-key go together") != std::string::npos);

  CliResult mismatched = RunCli({"run", "--records", pki.dir + "/records.json", "--bus",
                                 "nats://127.0.0.1:1", "--tls-cert", pki.cert_file, "--tls-key",
                                 pki.second.key_file, "--listen", "127.0.0.1:0"});
  INFO(mismatched.output);
  CHECK(mismatched.exit_code == 1);
  CHECK(mismatched.output.find("does not match the certificate") != std::string::npos);
  CHECK(mismatched.output.find("PRIVATE KEY") == std::string::npos);
}

}  // namespace
}  // namespace mesh::reconciler::test
