#include "coordinator/http/request_stream.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace memcoord::coordinator {
namespace {

// The numeric host and port of a socket address from getpeername/getsockname.
void NumericAddress(const sockaddr_storage& address, socklen_t length, std::string& ip, int& port) {
  char host[NI_MAXHOST] = "";
  char service[NI_MAXSERV] = "";
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof(host), service,
                    sizeof(service), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(service);
}

}  // namespace

RequestStream::RequestStream(int fd, std::string_view request, Clock::time_point deadline,
                             std::chrono::milliseconds write_stall)
    : fd_(fd), request_(request), deadline_(deadline), write_stall_(write_stall) {}

bool RequestStream::is_readable() const { return read_ < request_.size(); }

bool RequestStream::is_writable() const { return wait_writable(); }

ssize_t RequestStream::read(char* ptr, std::size_t size) {
  const std::size_t n = std::min(size, request_.size() - read_);
  std::memcpy(ptr, request_.data() + read_, n);
  read_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t RequestStream::write(const char* ptr, std::size_t size) {
  std::size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_writable()) return -1;
    } else {
      return -1;
    }
  }
  return static_cast<ssize_t>(size);
}

bool RequestStream::wait_writable() const {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
  if (left.count() <= 0) return false;
  pollfd entry{fd_, POLLOUT, 0};
  int ready = 0;
  do {
    ready = ::poll(&entry, 1, static_cast<int>(std::min(left, write_stall_).count()));
  } while (ready < 0 && errno == EINTR);
  return ready > 0 && (entry.revents & POLLOUT) != 0 && (entry.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
}

void RequestStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    NumericAddress(address, length, ip, port);
  }
}

void RequestStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    NumericAddress(address, length, ip, port);
  }
}

socket_t RequestStream::socket() const { return fd_; }

}  // namespace memcoord::coordinator
