#include "tests/faults/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace memcoord::testing {
namespace {

constexpr int kPollMs = 5;  // how soon a stall or its end takes effect

int Loopback(int port, bool listen) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int rc = listen ? ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr))
                        : ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  if (rc != 0 || (listen && ::listen(fd, 64) != 0)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

TcpProxy::TcpProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = Loopback(0, /*listen=*/true);
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (listen_fd_ >= 0 && ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port_ = ntohs(addr.sin_port);
  }
  thread_ = std::thread([this] { loop(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  thread_.join();
  for (auto [client, upstream] : pairs_) {
    ::close(client);
    ::close(upstream);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void TcpProxy::accept_one() {
  const int client = ::accept(listen_fd_, nullptr, nullptr);
  if (client < 0) return;
  const int upstream = Loopback(target_port_, /*listen=*/false);
  if (upstream < 0) {  // nothing behind the proxy: the client sees a closed connection, as without it
    ::close(client);
    return;
  }
  const int one = 1;
  ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  pairs_.emplace_back(client, upstream);
  ++connections_;
}

bool TcpProxy::pump(int from, int to) {
  char buffer[1 << 16];
  const ssize_t n = ::read(from, buffer, sizeof(buffer));
  if (n <= 0) return false;
  for (ssize_t done = 0; done < n;) {
    const ssize_t w = ::write(to, buffer + done, static_cast<std::size_t>(n - done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += w;
  }
  return true;
}

void TcpProxy::loop() {
  while (!stop_) {
    std::vector<pollfd> fds;
    fds.push_back({listen_fd_, POLLIN, 0});
    // Stalled: the connections are not polled at all (not even for a close), as with a silent network.
    const bool moving = !stalled_;
    if (moving) {
      for (auto [client, upstream] : pairs_) {
        fds.push_back({client, POLLIN, 0});
        fds.push_back({upstream, POLLIN, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), kPollMs) <= 0) continue;
    if (moving) {
      std::vector<std::pair<int, int>> open;
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        auto [client, upstream] = pairs_[i];
        bool ok = true;
        if (fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) ok = pump(client, upstream);
        if (ok && (fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR))) ok = pump(upstream, client);
        if (ok) {
          open.emplace_back(client, upstream);
        } else {
          ::close(client);
          ::close(upstream);
        }
      }
      pairs_.swap(open);
    }
    if (fds[0].revents & POLLIN) accept_one();  // after the pairs: fds[] indexes the pairs polled above
  }
}

}  // namespace memcoord::testing
