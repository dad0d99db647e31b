// CoordinatorService: the memcoord.v1.Coordinator gRPC service, a thin layer over the core (ClusterState,
// TrimOrchestrator, QuotaPolicy, LeakWatch, PlanOnCluster). Handlers translate messages, call the core and
// map its Status through ToGrpcStatus, the one mapping point. Attach sessions are callback reactors (no
// thread per session; a reaction never blocks): commands to a session are queued and written one at a time,
// so sending to a slow or stopped worker never blocks the sender. Admin calls are synchronous handlers.
//
// Liveness: a broken Attach stream marks its worker dead at once; the liveness thread marks silent workers
// dead (3 x their report interval) and cancels their stream. Either way every live worker of the dead
// worker's group gets an Abort naming it. A worker that closes its stream cleanly (WritesDone) is recorded
// as detached without aborting anyone.
//
// Internal to the coordinator library (includes generated gRPC headers); the public face is
// CoordinatorServer. Thread safety: all handlers and public methods are thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "coordinator/service/ack_board.h"
#include "coordinator/service/cluster_state.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/leak_watch.h"
#include "coordinator/service/quota_policy.h"
#include "coordinator/service/report_latency.h"
#include "coordinator/service/trim_orchestrator.h"
#include "memcoord/v1/coordinator.grpc.pb.h"

namespace memcoord::coordinator {

class CoordinatorService final : public v1::Coordinator::WithCallbackMethod_Attach<v1::Coordinator::Service> {
 public:
  explicit CoordinatorService(const CoordinatorOptions& options);
  ~CoordinatorService() override;

  grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* Attach(
      grpc::CallbackServerContext* context) override;
  grpc::Status GetCluster(grpc::ServerContext* context, const v1::GetClusterRequest* request,
                          v1::ClusterSnapshot* reply) override;
  grpc::Status Trim(grpc::ServerContext* context, const v1::TrimRequest* request,
                    v1::TrimResponse* reply) override;
  grpc::Status SetQuota(grpc::ServerContext* context, const v1::SetQuotaRequest* request,
                        v1::SetQuotaResponse* reply) override;
  grpc::Status Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                     grpc::ServerWriter<v1::ClusterSnapshot>* writer) override;
  grpc::Status Put(grpc::ServerContext* context, const v1::PutRequest* request,
                   v1::PutResponse* reply) override;
  grpc::Status Get(grpc::ServerContext* context, const v1::GetRequest* request,
                   v1::GetResponse* reply) override;
  grpc::Status Plan(grpc::ServerContext* context, const v1::PlanRequest* request,
                    v1::PlanReply* reply) override;

  ClusterView snapshot() const;
  // Ends every wait, cancels every session and stops the liveness thread. Idempotent.
  void shutdown();

 private:
  class Session;

  Status authenticate(const grpc::ServerContextBase& context) const;
  // Session events (on gRPC's callback threads).
  Status register_session(Session* session, const v1::Register& request);
  void handle_report(Session& session, const v1::Report& report, Status* result);
  void session_ended(Session* session, bool broken, const Status& result);
  void handle_oom(Session& session, const v1::OomRequest& request);
  // Quota views of every pool on `rank`'s device, from the latest reports.
  std::vector<PoolQuotaView> device_pools(int rank) const;
  // Moves quota toward a pool of `rank` that is near its limit (>= 90%), before it runs out.
  void rebalance(int rank, const std::vector<PoolUsage>& pools);
  Status apply_limits(const std::vector<QuotaChange>& changes, bool wait_for_acks);
  // Sends to the live session holding `rank`; false when there is none or the write failed.
  bool send_to_rank(int rank, const v1::CoordinatorMessage& message);
  void on_dead(const DeadWorker& dead);
  void liveness_loop();

  const CoordinatorOptions options_;
  const std::string coordinator_id_;
  const Clock::time_point started_at_;
  ClusterState state_;
  AckBoard acks_;
  TrimOrchestrator trims_;
  LeakWatch leaks_;
  LatencyRecorder report_latency_;
  std::atomic<std::uint64_t> next_command_id_{1};
  std::atomic<bool> shutting_down_{false};

  mutable std::mutex sessions_mu_;
  // sessions_mu_ guards the following.
  // Registered sessions by session id. A Session is deleted by gRPC (OnDone) only after it left this map,
  // so a pointer taken under sessions_mu_ is valid while the lock is held.
  std::map<std::uint64_t, Session*> sessions_;

  std::mutex rebalance_mu_;
  // rebalance_mu_ guards the following: when each (rank, pool) was last given quota (rate limit).
  std::map<std::pair<int, std::string>, Clock::time_point> last_rebalance_;

  std::mutex kv_mu_;
  std::condition_variable kv_cv_;
  // kv_mu_ guards the following.
  std::map<std::string, std::string> kv_;

  std::mutex stop_mu_;
  std::condition_variable stop_cv_;  // wakes the liveness thread and Watch streams on shutdown
  std::thread liveness_;
};

}  // namespace memcoord::coordinator
