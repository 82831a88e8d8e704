#include "observers/http_client.h"

#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include "observers/url.h"

namespace mesh::observers {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
namespace ssl = net::ssl;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

enum class Scheme { kHttp, kHttps };

struct HttpTarget {
  Scheme scheme = Scheme::kHttp;
  std::string host;  // without brackets
  std::string port;
  std::string path;
  std::string address;  // "http[s]://host:port" for messages: never userinfo, path or query
};

// Parses "http[s]://[userinfo@]host[:port][/path]". The userinfo, if any, is dropped.
std::optional<HttpTarget> ParseHttpUrl(const std::string& url) {
  HttpTarget target;
  std::string_view scheme;
  for (std::string_view candidate : {"http", "https"}) {
    if (url.compare(0, candidate.size() + 3, std::string(candidate) + "://") == 0) {
      scheme = candidate;
    }
  }
  if (scheme.empty()) return std::nullopt;
  target.scheme = scheme == "https" ? Scheme::kHttps : Scheme::kHttp;
  const std::string default_port = target.scheme == Scheme::kHttps ? "443" : "80";
  std::string rest = StripUserInfo(url).substr(scheme.size() + 3);
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  target.path = slash == std::string::npos ? "/" : rest.substr(slash);
  std::optional<HostPort> split = SplitHostPort(authority);
  if (!split || split->host.empty()) return std::nullopt;
  target.host = std::move(split->host);
  target.port = split->port.value_or(default_port);  // "host:" names an empty port: refused
  if (!ParsePort(target.port)) return std::nullopt;
  target.address = std::string(scheme) + "://" + JoinHostPort(target.host, target.port);
  return target;
}

// A client context that verifies the peer's chain against `ca_file` only (or, when empty, the
// system's CAs), TLS 1.2 or later.
Result<std::unique_ptr<ssl::context>> ClientContext(const std::string& ca_file) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  if (SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION) != 1) {
    return Status(Errc::kInternal, "cannot require TLS 1.2");
  }
  beast::error_code ec;
  if (ca_file.empty()) {
    context->set_default_verify_paths(ec);
    if (ec) return Status(Errc::kIo, "cannot load the system's CAs: " + ec.message());
  } else {
    context->load_verify_file(ca_file, ec);
    if (ec) return Status(Errc::kIo, "cannot read the CA file " + ca_file + ": " + ec.message());
  }
  context->set_verify_mode(ssl::verify_peer);
  return context;
}

// Makes the handshake check that the certificate names `host` (an IP literal against IP
// subjectAltNames, a DNS name against DNS names, with SNI).
bool ExpectHost(SSL* ssl, const std::string& host) {
  beast::error_code not_ip;
  net::ip::make_address(host, not_ip);
  if (!not_ip) return X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1;
  return SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 && SSL_set1_host(ssl, host.c_str()) == 1;
}
}  // namespace

Result<HttpResponse> HttpGet(const std::string& url, std::chrono::milliseconds timeout) {
  HttpCall call;
  call.url = url;
  return HttpSend(call, timeout);
}

Result<HttpResponse> HttpSend(const HttpCall& call, std::chrono::milliseconds timeout) {
  std::optional<HttpTarget> target = ParseHttpUrl(call.url);
  if (!target) return Status(Errc::kInvalidArgument, "not an http:// or https:// URL");
  const http::verb verb = http::string_to_verb(call.method);
  if (verb == http::verb::unknown) return Status(Errc::kInvalidArgument, "unknown HTTP method");
  // The address only: a path given by the caller (a base path, a query) may carry a secret.
  const std::string what = call.method + " " + target->address;

  net::io_context ioc;
  tcp::resolver resolver(ioc);
  http::request<http::string_body> request{verb, target->path, 11};
  request.set(http::field::host, target->host);
  request.set(http::field::user_agent, "mesh-reconciler");
  for (const auto& [name, value] : call.headers) request.set(name, value);
  request.body() = call.body;
  request.keep_alive(false);
  request.prepare_payload();
  beast::flat_buffer buffer;
  http::response<http::string_body> response;

  std::optional<Status> outcome;
  auto fail = [&](const char* stage, const beast::error_code& ec, const std::string& detail = "") {
    const Errc code = ec == beast::error::timeout ? Errc::kTimeout : Errc::kUnavailable;
    outcome = Status(code, what + ": " + stage + ": " + ec.message() + detail);
  };
  // Every operation is asynchronous so that the stream's deadline applies to all of them; the
  // caller still sees one synchronous call. Each step's handler lives in this frame until
  // run_for returns.
  auto exchange = [&](auto& stream) {
    constexpr bool kTls = std::is_same_v<std::decay_t<decltype(stream)>, TlsStream>;
    beast::tcp_stream& tcp_stream = beast::get_lowest_layer(stream);
    auto read = [&] {
      http::async_read(stream, buffer, response, [&](const beast::error_code& ec, size_t) {
        if (ec) return fail("read", ec);
        outcome = Status::Ok();
      });
    };
    auto write = [&] {
      http::async_write(stream, request, [&](const beast::error_code& ec, size_t) {
        if (ec) return fail("write", ec);
        read();
      });
    };
    auto handshake = [&] {
      if constexpr (kTls) {
        stream.async_handshake(ssl::stream_base::client, [&](const beast::error_code& ec) {
          if (!ec) return write();
          const long verified = SSL_get_verify_result(stream.native_handle());
          fail("TLS handshake", ec,
               verified == X509_V_OK
                   ? ""
                   : std::string(" (") + X509_verify_cert_error_string(verified) + ")");
        });
      } else {
        write();
      }
    };
    tcp_stream.expires_after(timeout);
    resolver.async_resolve(
        target->host, target->port,
        [&](const beast::error_code& ec, const tcp::resolver::results_type& endpoints) {
          if (ec) return fail("resolve", ec);
          tcp_stream.async_connect(endpoints,
                                   [&](const beast::error_code& ec, const tcp::endpoint&) {
                                     if (ec) return fail("connect", ec);
                                     handshake();
                                   });
        });
    ioc.run_for(timeout);
  };
  if (target->scheme == Scheme::kHttp) {
    beast::tcp_stream stream(ioc);
    exchange(stream);
  } else {
    Result<std::unique_ptr<ssl::context>> context = ClientContext(call.ca_file);
    if (!context.ok()) {
      return Status(context.status().code(), what + ": " + context.status().message());
    }
    TlsStream stream(ioc, **context);
    if (!ExpectHost(stream.native_handle(), target->host)) {
      return Status(Errc::kInvalidArgument, what + ": cannot check the certificate's name");
    }
    exchange(stream);
  }
  if (!outcome) {
    return Status(Errc::kTimeout, what + ": no answer");
  }
  if (!outcome->ok()) return *outcome;
  return HttpResponse{static_cast<int>(response.result_int()), std::move(response.body())};
}

}  // namespace mesh::observers
