// Small POSIX TCP helpers for the bootstrap side channel (engine/parallel/rendezvous.h): an owning
// socket, a listener, a connect that retries, and sends/receives that never wait past a deadline.
// They report what happened (no exceptions) so the caller can word the error with its own context
// (rank, MASTER_ADDR, port). Tensors never travel over these sockets.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace loft::parallel {

using Clock = std::chrono::steady_clock;

// Owns one file descriptor and closes it on every path.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket();
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// How a bounded wait ended; `error` is the errno for kFailed.
struct IoStatus {
  enum Kind { kOk, kTimeout, kClosed, kFailed } kind = kOk;
  int error = 0;
  bool ok() const { return kind == kOk; }
  std::string str() const;  // "timed out", "connection closed by the other side", strerror
};

// A non-blocking listener on every local address (IPv6 accepting IPv4 too where the host has
// IPv6, else IPv4), SO_REUSEADDR so a restarted run can take the port at once. Invalid socket and
// errno in *error on failure.
Socket tcp_listen(int port, int* error);

// The local port a listener is bound to (tests bind port 0 and ask).
int bound_port(const Socket& s);

// Waits until a peer connects or the deadline passes; *peer gets its numeric address.
IoStatus tcp_accept(const Socket& listener, Clock::time_point deadline, Socket* out,
                    std::string* peer);

// Connects to host:port, resolving the name (getaddrinfo) and retrying every few tens of
// milliseconds until the deadline (the listener may not exist yet). Invalid socket on timeout;
// *last_error says what the last try that ended before the deadline met ("Connection refused",
// a resolver message, ...).
Socket tcp_connect(const std::string& host, int port, Clock::time_point deadline,
                   std::string* last_error);

// All n bytes, or why not by the deadline.
IoStatus send_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline);
IoStatus recv_all(const Socket& s, void* data, size_t n, Clock::time_point deadline);

}  // namespace loft::parallel
