// A flood of HTTP clients that never finish a request, for the listener's probe tests and the
// load benchmark: `idle` connections that send nothing and `slow` ones that send a request one
// byte every 100 ms and never its last byte. Whatever the server closes is opened again at
// once, as an attacker would.
//
// Thread-safety: one background thread owns the sockets; reopened() may be read from any thread.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace mesh::testing {

// Holds `idle` connections that send nothing and `slow` ones that send a request one byte at a
// time to 127.0.0.1:`port`, from `addresses` source addresses (127.0.0.2, 127.0.0.3, ...; the
// sockets are dealt out in turn); whatever the server closes is opened again.
class Flood {
 public:
  Flood(int port, int idle, int slow, int addresses = 1) : port_(port) {
    sockets_.resize(static_cast<size_t>(idle + slow), Socket{});
    for (size_t i = 0; i < sockets_.size(); ++i) {
      sockets_[i].source = 0x7f000002u + static_cast<uint32_t>(i % static_cast<size_t>(addresses));
      sockets_[i].slow = i >= static_cast<size_t>(idle);
    }
    thread_ = std::thread([this] { Run(); });
  }
  ~Flood() {
    stop_ = true;
    thread_.join();
    for (Socket& s : sockets_) {
      if (s.fd >= 0) close(s.fd);
    }
  }
  int reopened() const { return reopened_.load(); }

 private:
  struct Socket {
    int fd = -1;
    size_t sent = 0;
    bool slow = false;
    uint32_t source = 0x7f000002u;  // host order
  };
  int Open(uint32_t source_address) const {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in source{};
    source.sin_family = AF_INET;
    source.sin_addr.s_addr = htonl(source_address);
    sockaddr_in target{};
    target.sin_family = AF_INET;
    target.sin_port = htons(static_cast<uint16_t>(port_));
    target.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&source), sizeof source) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target) != 0) {
      close(fd);
      return -1;
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
  }
  void Run() {
    static const std::string kRequest = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    while (!stop_) {
      for (Socket& s : sockets_) {
        if (stop_) break;
        if (s.fd >= 0) {
          char byte;
          const ssize_t n = recv(s.fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
          if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
            close(s.fd);
            s.fd = -1;
          }
        }
        if (s.fd < 0) {
          s.fd = Open(s.source);
          s.sent = 0;
          ++reopened_;
          continue;
        }
        if (s.slow && s.sent < kRequest.size() - 1) {  // never the last byte
          if (send(s.fd, kRequest.data() + s.sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) ++s.sent;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  int port_;
  std::vector<Socket> sockets_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reopened_{0};
  std::thread thread_;
};

}  // namespace mesh::testing
