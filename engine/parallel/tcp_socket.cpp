#include "engine/parallel/tcp_socket.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <thread>

#include "engine/core/error.h"

namespace loft::parallel {

namespace {

// Pause between connection attempts while the listener is not up yet.
constexpr std::chrono::milliseconds kRetryPause{50};

void set_nonblocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

// poll() for `events` until the deadline, resuming after signals. kOk when ready.
IoStatus wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return {IoStatus::kTimeout, 0};
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, int(std::min<long long>(left.count(), 1 << 30)));
    if (r > 0) return {};  // readable/writable, or an error the next call reports
    if (r < 0 && errno != EINTR) return {IoStatus::kFailed, errno};
  }
}

std::string numeric_host(const sockaddr* a, socklen_t len) {
  char host[NI_MAXHOST] = "?";
  ::getnameinfo(a, len, host, sizeof host, nullptr, 0, NI_NUMERICHOST);
  // An IPv4 peer on the dual-stack listener shows as ::ffff:a.b.c.d; name it as people wrote it.
  const std::string_view h(host);
  return std::string(h.starts_with("::ffff:") && h.find('.') != h.npos ? h.substr(7) : h);
}

// One non-blocking connect attempt to one resolved address, bounded by the deadline.
Socket connect_once(const addrinfo* ai, Clock::time_point deadline, int* error) {
  Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!s.valid()) return (*error = errno, Socket());
  set_nonblocking(s.fd());
  if (::connect(s.fd(), ai->ai_addr, ai->ai_addrlen) == 0) return s;
  if (errno != EINPROGRESS) return (*error = errno, Socket());
  const IoStatus w = wait_for(s.fd(), POLLOUT, deadline);
  if (w.kind == IoStatus::kTimeout) return (*error = 0, Socket());  // our deadline, not the net's
  int err = w.error;
  socklen_t len = sizeof err;
  if (w.ok()) ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return (*error = err, Socket());
  return s;
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

std::string IoStatus::str() const {
  switch (kind) {
    case kOk:
      return "ok";
    case kTimeout:
      return "timed out";
    case kClosed:
      return "connection closed by the other side";
    case kFailed:
      break;
  }
  return std::strerror(error);
}

Socket tcp_listen(int port, int* error) {
  *error = 0;
  // IPv6 first: with IPV6_V6ONLY off one socket serves both families.
  for (const int family : {AF_INET6, AF_INET}) {
    Socket s(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
      *error = errno;
      continue;
    }
    const int one = 1, zero = 0;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_storage addr{};
    socklen_t len = 0;
    if (family == AF_INET6) {
      ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
      auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
      a6->sin6_family = AF_INET6;
      a6->sin6_addr = in6addr_any;
      a6->sin6_port = htons(uint16_t(port));
      len = sizeof *a6;
    } else {
      auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
      a4->sin_family = AF_INET;
      a4->sin_addr.s_addr = htonl(INADDR_ANY);
      a4->sin_port = htons(uint16_t(port));
      len = sizeof *a4;
    }
    if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(s.fd(), SOMAXCONN) != 0) {
      *error = errno;
      // A taken port is taken for both families: trying IPv4 would only hide the reason.
      if (*error == EADDRINUSE) return Socket();
      continue;
    }
    set_nonblocking(s.fd());
    *error = 0;
    return s;
  }
  return Socket();
}

int bound_port(const Socket& s) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  LOFT_CHECK(::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) == 0,
             "getsockname: ", std::strerror(errno));
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

IoStatus tcp_accept(const Socket& listener, Clock::time_point deadline, Socket* out,
                    std::string* peer) {
  for (;;) {
    const IoStatus w = wait_for(listener.fd(), POLLIN, deadline);
    if (!w.ok()) return w;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len,
                             SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      *out = Socket(fd);
      *peer = numeric_host(reinterpret_cast<sockaddr*>(&addr), len);
      return {};
    }
    // The peer may have gone between poll and accept: wait for the next one.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED && errno != EINTR)
      return {IoStatus::kFailed, errno};
  }
}

Socket tcp_connect(const std::string& host, int port, Clock::time_point deadline,
                   std::string* last_error) {
  *last_error = std::strerror(ETIMEDOUT);  // what stays when every try ran into the deadline
  const std::string service = std::to_string(port);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    // Resolved on every try: a name may appear late (a cluster's DNS filling in at start-up).
    const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &list);
    if (rc != 0) {
      *last_error = ::gai_strerror(rc);
    } else {
      for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        int error = 0;
        Socket s = connect_once(ai, deadline, &error);
        if (s.valid()) {
          ::freeaddrinfo(list);
          return s;
        }
        if (error != 0) *last_error = std::strerror(error);
      }
      ::freeaddrinfo(list);
    }
    const auto now = Clock::now();
    if (now >= deadline) return Socket();
    std::this_thread::sleep_for(std::min<Clock::duration>(kRetryPause, deadline - now));
  }
}

IoStatus send_all(const Socket& s, const void* data, size_t n, Clock::time_point deadline) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    // MSG_NOSIGNAL: a peer that died must give an error here, not a SIGPIPE that kills us.
    const ssize_t k = ::send(s.fd(), p, n, MSG_NOSIGNAL);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k < 0 && errno == EPIPE) return {IoStatus::kClosed, 0};
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return {IoStatus::kFailed, errno};
    const IoStatus w = wait_for(s.fd(), POLLOUT, deadline);
    if (!w.ok()) return w;
  }
  return {};
}

IoStatus recv_all(const Socket& s, void* data, size_t n, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t k = ::recv(s.fd(), p, n, 0);
    if (k > 0) {
      p += k;
      n -= size_t(k);
      continue;
    }
    if (k == 0) return {IoStatus::kClosed, 0};
    if (errno == ECONNRESET) return {IoStatus::kClosed, 0};
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return {IoStatus::kFailed, errno};
    const IoStatus w = wait_for(s.fd(), POLLIN, deadline);
    if (!w.ok()) return w;
  }
  return {};
}

}  // namespace loft::parallel
