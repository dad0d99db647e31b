#include "coordinator/service/metrics_http.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

namespace memcoord::coordinator {
namespace {

std::string Labels(const WorkerRecord& w, const std::string& pool) {
  return fmt::format("rank=\"{}\",host=\"{}\",device=\"{}\",pool=\"{}\"", w.id.rank, w.id.host, w.id.device,
                     pool);
}

}  // namespace

std::string RenderPrometheus(const ClusterView& view) {
  std::string out;
  auto family = [&out](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("memcoord_worker_live", "gauge", "1 when the worker holding the rank is live");
  for (const WorkerRecord& w : view.workers) {
    out += fmt::format("memcoord_worker_live{{rank=\"{}\",host=\"{}\"}} {}\n", w.id.rank, w.id.host,
                       w.state == WorkerState::kLive ? 1 : 0);
  }
  family("memcoord_worker_step", "gauge", "last completed training step");
  for (const WorkerRecord& w : view.workers) {
    out += fmt::format("memcoord_worker_step{{rank=\"{}\"}} {}\n", w.id.rank, w.step);
  }
  const struct {
    const char* name;
    const char* help;
    std::uint64_t PoolUsage::*field;
  } pool_fields[] = {
      {"memcoord_pool_allocated_bytes", "live bytes in the pool", &PoolUsage::allocated_bytes},
      {"memcoord_pool_reserved_bytes", "bytes the pool holds from the device", &PoolUsage::reserved_bytes},
      {"memcoord_pool_peak_reserved_bytes", "peak reserved bytes", &PoolUsage::peak_reserved_bytes},
      {"memcoord_pool_limit_bytes", "quota (0: none)", &PoolUsage::limit_bytes},
      {"memcoord_pool_trimmed_bytes_total", "bytes released by trims", &PoolUsage::trimmed_bytes},
      {"memcoord_pool_ooms_total", "allocations that failed", &PoolUsage::ooms},
  };
  for (const auto& f : pool_fields) {
    family(f.name, "gauge", f.help);
    for (const WorkerRecord& w : view.workers) {
      for (const PoolUsage& p : w.pools) {
        out += fmt::format("{}{{{}}} {}\n", f.name, Labels(w, p.name), p.*(f.field));
      }
    }
  }
  family("memcoord_leak_bytes_per_step", "gauge", "steady growth of live bytes per step (likely leak)");
  for (const LeakAlert& l : view.leaks) {
    out += fmt::format("memcoord_leak_bytes_per_step{{rank=\"{}\",pool=\"{}\",tag=\"{}\"}} {}\n", l.rank,
                       l.pool, l.tag, l.bytes_per_step);
  }
  family("memcoord_reports_total", "counter", "reports handled");
  out += fmt::format("memcoord_reports_total {}\n", view.stats.reports);
  family("memcoord_report_handling_p99_seconds", "gauge", "p99 time to handle one report");
  out +=
      fmt::format("memcoord_report_handling_p99_seconds {:.9f}\n", view.stats.report_handling_p99_us / 1e6);
  family("memcoord_live_sessions", "gauge", "attached workers");
  out += fmt::format("memcoord_live_sessions {}\n", view.stats.live_sessions);
  return out;
}

Result<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& listen,
                                                                    std::function<std::string()> render) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument(fmt::format("metrics address must be HOST:PORT, got '{}'", listen));
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  const std::string host = listen.substr(0, colon);
  if (inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument(fmt::format("metrics host must be an IPv4 address, got '{}'", host));
  }
  int port = 0;
  try {
    port = std::stoi(listen.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument(fmt::format("metrics port must be in [0, 65535], got '{}'", listen));
  }
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(fmt::format("metrics socket: {}", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd);
    return Unavailable(fmt::format("cannot listen for metrics on {}: {}", listen, error));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, ntohs(addr.sin_port), std::move(render)));
}

MetricsHttpServer::MetricsHttpServer(int fd, int port, std::function<std::string()> render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { serve(); });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stop_.exchange(true)) return;
  if (thread_.joinable()) thread_.join();
  ::close(fd_);
}

void MetricsHttpServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const int client = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    timeval timeout{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    ::setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    char buffer[4096];
    (void)::recv(client, buffer, sizeof(buffer), 0);  // the request itself does not matter
    std::string body;
    const char* status = "200 OK";
    try {  // an exception would end the process from this thread
      body = render_();
    } catch (const std::exception& e) {
      status = "500 Internal Server Error";
      body = fmt::format("rendering the metrics failed: {}\n", e.what());
    }
    const std::string response = fmt::format(
        "HTTP/1.0 {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n"
        "Connection: close\r\n\r\n{}",
        status, body.size(), body);
    std::size_t sent = 0;
    while (sent < response.size()) {
      const ssize_t n = ::send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    ::close(client);
  }
}

}  // namespace memcoord::coordinator
