// MetricsHttpServer: a tiny HTTP/1.0 responder for Prometheus scrapes. Every request on the socket gets
// 200 and the text `render()` returns (one thread, one connection at a time, 1 s I/O timeouts, so a stuck
// client delays scrapes but never the coordinator). RenderPrometheus turns a ClusterView into the text
// exposition format. Thread safety: Start/Stop from one thread; render() is called on the server thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/result.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

std::string RenderPrometheus(const ClusterView& view);

class MetricsHttpServer {
 public:
  // `listen` is "HOST:PORT" (IPv4; port 0: ephemeral). UNAVAILABLE when it cannot bind.
  static Result<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                          std::function<std::string()> render);
  ~MetricsHttpServer();
  int port() const { return port_; }
  void Stop();

 private:
  MetricsHttpServer(int fd, int port, std::function<std::string()> render);
  void serve();

  const int fd_;
  const int port_;
  const std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace memcoord::coordinator
