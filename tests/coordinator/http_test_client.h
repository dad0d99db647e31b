// Test helpers for the HTTP side: raw loopback sockets (requests sent exactly as written, slowly if wanted)
// and an HttpServer over a fixed cluster view whose names are easy to look for in an answer.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "coordinator/http/http_server.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::testing {

// Every name in SecretView() contains this: an answer holding it holds cluster data.
inline constexpr std::string_view kClusterMarker = "b7e1";

// One worker with one pool, its host, GPU UUID and pool named with kClusterMarker.
inline coordinator::ClusterView SecretView() {
  coordinator::ClusterView view;
  coordinator::WorkerRecord w;
  w.id.rank = 0;
  w.id.host = "host-b7e1";
  w.id.device_uuid = "GPU-b7e1";
  w.id.device_total_bytes = 1 << 30;
  w.device_free_bytes = 1 << 29;
  coordinator::PoolUsage pool;
  pool.name = "pool-b7e1";
  pool.allocated_bytes = 4096;
  pool.reserved_bytes = 8192;
  w.pools.push_back(pool);
  view.workers.push_back(w);
  return view;
}

// An HttpServer on an ephemeral loopback port over SecretView(); its trim answers {"complete": true}.
inline std::unique_ptr<coordinator::HttpServer> StartSecretHttp(coordinator::HttpServerOptions options) {
  options.listen = "127.0.0.1:0";
  coordinator::HttpHandlers handlers;
  handlers.snapshot = [] { return SecretView(); };
  handlers.trim = [](std::uint64_t) -> Result<std::string> { return std::string(R"({"complete":true})"); };
  auto server = coordinator::HttpServer::Start(options, std::move(handlers));
  return server.ok() ? std::move(*server) : nullptr;
}

// A TCP connection to 127.0.0.1:`port` (-1 on failure) whose reads give up after `read_timeout`.
inline int ConnectLoopback(int port, std::chrono::milliseconds read_timeout = std::chrono::seconds(5)) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  timeval timeout{static_cast<time_t>(read_timeout.count() / 1000),
                  static_cast<suseconds_t>(read_timeout.count() % 1000 * 1000)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, std::string_view bytes) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

// Everything the server sends until it closes (or the read timeout passes).
inline std::string ReadToEnd(int fd) {
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    answer.append(buffer, static_cast<std::size_t>(n));
  return answer;
}

// `request` sent as is over a fresh connection; the whole answer ("" when it cannot connect).
inline std::string RawExchange(int port, std::string_view request) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return "";
  std::string answer = SendAll(fd, request) ? ReadToEnd(fd) : "";
  ::close(fd);
  return answer;
}

}  // namespace memcoord::testing
