// CoordinatorServer: the gRPC coordinator, started in-process (the `memcoord coordinator` command, tests
// and benchmarks). Start() binds, starts serving (Coordinator service, grpc.health.v1 and server
// reflection) and a liveness thread; the object owns all of it and stops it in Shutdown() or its destructor.
// No gRPC type appears here (pimpl).
//
// Thread safety: every method is thread-safe. Failure: Start() returns UNAVAILABLE when the address cannot
// be bound, INVALID_ARGUMENT for a malformed option.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/result.h"
#include "coordinator/service/cluster_types.h"
#include "coordinator/service/leak_watch.h"
#include "coordinator/service/trim_orchestrator.h"

namespace memcoord::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:0";  // port 0: an ephemeral port (see port())
  std::string token;                   // empty: no authentication
  std::string metrics_listen;          // "127.0.0.1:9400": Prometheus text over HTTP; empty: off
  std::chrono::milliseconds liveness_period{25};
  int silence_factor = 3;                      // missed report intervals: suspect
  std::chrono::milliseconds dead_after{3000};  // silent this long: dead, its group aborted (--dead-after)
  TrimOrchestratorOptions trim;
  LeakWatchOptions leak;
};

class CoordinatorServer {
 public:
  static Result<std::unique_ptr<CoordinatorServer>> Start(const CoordinatorOptions& options);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const;
  std::string address() const;  // "127.0.0.1:PORT"
  int metrics_port() const;     // 0 when metrics are off
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
