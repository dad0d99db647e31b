// CoordinatorServer: the gRPC coordinator, started in-process (the `memcoord coordinator` command, tests
// and benchmarks). Start() binds, starts serving (the Coordinator service and grpc.health.v1, which stays
// open without a token; no server reflection: clients use proto/memcoord/v1/coordinator.proto) and a
// liveness thread; the object owns all of it and stops it in Shutdown() or its destructor. No gRPC type
// appears here (pimpl). Who may call what: access_policy.h; TLS, tokens and limits: CoordinatorOptions.
//
// Thread safety: every method is thread-safe. Failure: Start() returns UNAVAILABLE when the address cannot
// be bound; INVALID_ARGUMENT for a malformed option, an unreadable or non-PEM TLS file, equal worker and
// admin tokens, or a non-loopback address without a token and without `insecure`.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "coordinator/service/cluster_types.h"
#include "coordinator/service/leak_watch.h"
#include "coordinator/service/trim_orchestrator.h"

namespace memcoord::coordinator {

// TLS from PEM files (--tls-cert, --tls-key, --tls-client-ca). All empty: plaintext.
struct TlsFiles {
  std::string cert;       // the server's certificate (chain), PEM
  std::string key;        // its private key, PEM (unencrypted)
  std::string client_ca;  // set: mutual TLS; every client must present a certificate this CA signed
  bool enabled() const { return !cert.empty() || !key.empty() || !client_ca.empty(); }
};

// What one client may cost the coordinator. A call past a limit ends with RESOURCE_EXHAUSTED naming it;
// every other client is served on.
struct CoordinatorLimits {
  std::size_t max_message_bytes = std::size_t{4} << 20;  // --max-message-size: largest request accepted
  std::size_t max_sessions = 4096;                       // --max-sessions: open Attach streams at once
  // --max-watches: open Watch streams at once. Each holds one of the server's threads for as long as it is
  // open (status --watch, dashboards); a handful is the normal use.
  std::size_t max_watches = 64;
  // --max-report-rate: reports per second one Attach session may send, sustained (a burst of one second's
  // worth is allowed); beyond it the session is cut off (it counts as a broken session). Acks and OOM
  // requests are not counted (attach_reactor.h says why). A worker reports at step ends, at most one a
  // millisecond (Worker::step_end), and every report interval, so a loop of sub-millisecond steps sends
  // ~1,000/s: the default leaves it twice that, and still cuts off a runaway client (tens of thousands a
  // second) within a second.
  double max_reports_per_second = 2000;
};

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:0";  // port 0: an ephemeral port (see port())
  // Bearer tokens (access_policy.h): the worker token (--token-file) and the admin token
  // (--admin-token-file). Both empty: every RPC is open, allowed only on a loopback address or with
  // `insecure` (listen_policy.h).
  std::string token;
  std::string admin_token;
  bool insecure = false;  // --insecure: listen beyond loopback without a token (a loud warning)
  TlsFiles tls;
  CoordinatorLimits limits;
  // HTTP (coordinator/http/http_server.h): /metrics, the dashboard and its JSON API (with a token set, reads
  // need `token` or `admin_token`, admin actions `admin_token`). "127.0.0.1:9401", "9401" or ":9401"
  // (loopback); a non-loopback host must be named ("0.0.0.0:9401"). Empty: off. (--http-listen, alias
  // --metrics-listen.)
  std::string metrics_listen;
  std::chrono::milliseconds liveness_period{25};
  int silence_factor = 3;                      // missed report intervals: suspect
  std::chrono::milliseconds dead_after{3000};  // silent this long: dead, its group aborted (--dead-after)
  TrimOrchestratorOptions trim;
  LeakWatchOptions leak;
  // Tests only (a fault-injection seam): called with the message kind (WorkerMessage's field number)
  // before each Attach message is handled; it may throw, which the reactor must survive.
  std::function<void(int kind)> before_attach_message;
};

class CoordinatorServer {
 public:
  static Result<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorOptions& options);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const;
  std::string address() const;  // "127.0.0.1:PORT"
  int metrics_port() const;     // the HTTP port (metrics, dashboard); 0 when HTTP is off
  ClusterView snapshot() const;

  // Stops serving: sessions are cancelled (workers see a broken stream and reconnect elsewhere or later),
  // pending calls end within a fraction of a second. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() was called (by another thread or a signal handler's helper).
  void Wait();

 private:
  class Impl;
  explicit CoordinatorServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord::coordinator
