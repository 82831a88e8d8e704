// A raw loopback TCP client for the listener's tests: it sends what a well-behaved HTTP client
// would not (garbage, half a request, plain HTTP to a TLS port, nothing at all) and reads until
// the server closes the connection.
//
// Header-only (the test glob compiles only *_test.cc); uses Catch's REQUIRE. Thread-safety: one
// thread per RawClient.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <string>

namespace mesh::reconciler::test {

class RawClient {
 public:
  // Connects to 127.0.0.1:`port` from `source` (another loopback address, such as 127.0.0.2,
  // stands for another client); each receive waits at most `receive_timeout`.
  explicit RawClient(int port, std::chrono::seconds receive_timeout = std::chrono::seconds(5),
                     const char* source = "127.0.0.1")
      : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    REQUIRE(fd_ >= 0);
    timeval tv{static_cast<time_t>(receive_timeout.count()), 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    REQUIRE(inet_pton(AF_INET, source, &from.sin_addr) == 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawClient() { close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  void Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return;  // the server may close early (a limit); what it said is read next
      sent += static_cast<size_t>(n);
    }
  }
  // Everything until the server closes the connection (or the receive timeout).
  std::string ReadUntilClosed() {
    std::string all;
    char buf[4096];
    while (true) {
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = n == 0;
        return all;
      }
      all.append(buf, static_cast<size_t>(n));
    }
  }
  bool closed() const { return closed_; }

 private:
  int fd_;
  bool closed_ = false;
};

// The status code of a raw HTTP/1.1 response; 0 when it is not one.
inline int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

}  // namespace mesh::reconciler::test
