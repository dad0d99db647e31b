// CoordinatorService: the memcoord.v1.Coordinator gRPC service. It only wires the parts, as gRPC's
// route_guide does: each RPC authenticates the caller (access_policy.h: the token each RPC needs), then calls
// the part that owns the work and maps its Status through ToGrpcStatus, the one mapping point.
//
//   service_state       what the parts share (core state, sessions, store, stop signal)
//   attach_reactor      the Attach stream of one worker (callback reactor, non-blocking sends)
//   worker_events       what a worker's messages do; a dead worker aborts its group
//   liveness_sweeper    marks silent workers dead
//   quota_broker        SetQuota, OOM requests and pressure rebalancing
//   rpc_handlers        GetCluster, Watch, Plan, Trim, Put, Get
//
// Internal to the coordinator library (includes generated gRPC headers); the public face is
// CoordinatorServer. Thread safety: all handlers and public methods are thread-safe.
#pragma once

#include <string_view>

#include "coordinator/service/access_policy.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/liveness_sweeper.h"
#include "coordinator/service/quota_broker.h"
#include "coordinator/service/service_state.h"
#include "coordinator/service/worker_events.h"
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

  ClusterView snapshot() const { return state_.snapshot(); }
  // The Trim RPC without its authentication, for callers that authenticated otherwise (the HTTP admin API).
  Status trim(const v1::TrimRequest& request, v1::TrimResponse* reply);
  // Ends every wait, cancels every session and stops the liveness thread. Idempotent.
  void shutdown();

 private:
  // Checks the caller's bearer token for `rpc` (access_policy.h holds the table).
  Status authenticate(const grpc::ServerContextBase& context, std::string_view rpc) const;

  const AccessTokens tokens_;
  ServiceState state_;
  QuotaBroker quotas_;
  WorkerEvents events_;
  LivenessSweeper sweeper_;  // last: its thread starts once everything it uses exists
};

}  // namespace memcoord::coordinator
