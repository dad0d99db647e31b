// HttpServer: the coordinator's HTTP side, on cpp-httplib (Debian's libcpp-httplib-dev): Prometheus
// metrics, the live dashboard and its JSON API. httplib parses and routes; connections are read by a
// RequestGate (request_gate.h), which hands a request to the pool of worker threads only once it has arrived
// whole, so a slow or silent client holds a file descriptor for a bounded time and never a worker thread.
// A sampler thread feeds a ClusterHistory for the timelines.
//
//   GET  /              the dashboard (one page, assets compiled in; it holds no cluster data)
//   GET  /metrics       Prometheus text (prometheus_text.h)
//   GET  /api/cluster   every worker, pool, tag and leak alert (api_json.h)
//   GET  /api/timeline  per-rank memory samples and the events; ?since=UNIX_MS&ranks=0,1,2
//   GET  /api/events    events only; ?since=UNIX_MS
//   GET  /api/session   {"admin": bool, "admin_enabled": bool}: whether this caller's token is the admin's
//   POST /api/trim      admin only ("Authorization: Bearer <admin token>"): trims every live rank now
//   GET  /healthz       "ok" (liveness only: it says nothing about the cluster)
//
// Access: it listens on loopback unless a host is given explicitly ("PORT" alone means 127.0.0.1:PORT).
// Without a token every GET is open. With a worker token (`token`) or an admin token configured, as the
// gRPC side's GetCluster (access_policy.h), /metrics and the four GET /api/ endpoints above need
// "Authorization: Bearer <token>" (the scheme's name in any case) with the worker or the admin token; a
// missing or wrong one is 401 with "WWW-Authenticate: Bearer" and a JSON error naming the token wanted,
// never the data. / and /healthz stay open. POST /api/trim needs the admin token (401 otherwise) and is
// refused (403) when the coordinator has none. Tokens are compared in constant time.
//
// Slow clients (request_gate.h): a request must arrive whole within `request_deadline` (default 5 s) of when
// the server starts waiting for it, with at most `read_stall_timeout` (default 2 s) before its first byte and
// between reads (1 s before the first byte of a kept-alive connection's next request); otherwise the
// connection is closed, after a 408 when part of the request had come. A worker thread takes a request only
// once it is whole, and its answer must be written within 10 s of that (each write waiting at most 2 s for
// the client to read): no client holds a worker thread longer. At most 128 connections wait for their request
// at once; past that the accept loop waits, and new clients wait in the kernel's listen backlog.
//
// Thread safety: Start/Stop from one thread; handlers run on the pool's threads.
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
  std::string token;        // the worker token (--token-file): it may read; empty: none
  std::string admin_token;  // the admin token (--admin-token-file): it may read and trim; empty: none
  std::chrono::milliseconds request_deadline{5000};    // a whole request (head and body) within this
  std::chrono::milliseconds read_stall_timeout{2000};  // at most this before the first byte and between reads
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
  // UNAVAILABLE when it cannot bind, INVALID_ARGUMENT for a malformed address, no snapshot handler, or a
  // request deadline or read stall timeout that is not positive.
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
