// HttpServer: the coordinator's HTTP side, on cpp-httplib (Debian's libcpp-httplib-dev): Prometheus
// metrics, the live dashboard and its JSON API. A pool of threads serves requests (a slow client holds one
// thread, never the coordinator), and a sampler thread feeds a ClusterHistory for the timelines.
//
//   GET  /              the dashboard (one page, assets compiled in)
//   GET  /metrics       Prometheus text (prometheus_text.h)
//   GET  /api/cluster   every worker, pool, tag and leak alert (api_json.h)
//   GET  /api/timeline  per-rank memory samples and the events; ?since=UNIX_MS&ranks=0,1,2
//   GET  /api/events    events only; ?since=UNIX_MS
//   GET  /api/session   {"admin": bool, "admin_enabled": bool}: whether this caller's token is the admin's
//   POST /api/trim      admin only ("Authorization: Bearer <admin token>"): trims every live rank now
//   GET  /healthz       "ok"
//
// Security: it listens on loopback unless a host is given explicitly ("PORT" alone means 127.0.0.1:PORT).
// Everything but POST is read-only; POST routes need the admin token and are refused (403) when the
// coordinator has none. Thread safety: Start/Stop from one thread; handlers run on the pool's threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "coordinator/http/cluster_history.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

// memcoord's documented HTTP port (dcgm-exporter's is 9400).
constexpr int kDefaultHttpPort = 9401;

struct HttpListenAddress {
  std::string host;
  int port = 0;
};
// "PORT", ":PORT" (both loopback), "HOST:PORT", "[V6]:PORT". INVALID_ARGUMENT naming the text otherwise.
Result<HttpListenAddress> ParseHttpListen(const std::string& text);

struct HttpServerOptions {
  std::string listen;       // see ParseHttpListen; port 0: an ephemeral port (see port())
  std::string admin_token;  // empty: no admin actions over HTTP
  std::chrono::milliseconds sample_period{500};
  ClusterHistoryOptions history;
  int threads = 4;
};

struct HttpHandlers {
  std::function<ClusterView()> snapshot;
  // An admin's trim of every live rank, now, to `target_bytes` per pool: the JSON reply or an error.
  std::function<Result<std::string>(std::uint64_t target_bytes)> trim;
};

class HttpServer {
 public:
  // UNAVAILABLE when it cannot bind, INVALID_ARGUMENT for a malformed address.
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandlers handlers);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  const ClusterHistory& history() const;
  // Stops serving and sampling; idempotent.
  void Stop();

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord::coordinator
