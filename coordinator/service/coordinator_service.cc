#include "coordinator/service/coordinator_service.h"

#include "coordinator/service/attach_reactor.h"
#include "coordinator/service/rpc_handlers.h"
#include "coordinator/service/status_mapping.h"

namespace memcoord::coordinator {

CoordinatorService::CoordinatorService(const CoordinatorOptions& options)
    : tokens_{options.token, options.admin_token},
      state_(options),
      quotas_(state_),
      events_(state_, quotas_),
      sweeper_(state_, events_) {}

CoordinatorService::~CoordinatorService() { shutdown(); }

void CoordinatorService::shutdown() {
  if (!state_.stop.raise()) return;
  state_.kv.shutdown();
  state_.sessions.cancel_all();
  sweeper_.join();
}

Status CoordinatorService::authenticate(const grpc::ServerContextBase& context, std::string_view rpc) const {
  if (tokens_.open()) return Status::Ok();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return Authorize(tokens_, nullptr, rpc);
  const std::string_view value(it->second.data(), it->second.size());
  return Authorize(tokens_, &value, rpc);
}

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* CoordinatorService::Attach(
    grpc::CallbackServerContext* context) {
  return StartAttachSession(context, state_, events_, authenticate(*context, "Attach"));
}

grpc::Status CoordinatorService::GetCluster(grpc::ServerContext* context,
                                            const v1::GetClusterRequest* /*request*/,
                                            v1::ClusterSnapshot* reply) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "GetCluster"));
  return ToGrpcStatus(HandleGetCluster(state_, reply));
}

grpc::Status CoordinatorService::Trim(grpc::ServerContext* context, const v1::TrimRequest* request,
                                      v1::TrimResponse* reply) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "Trim"));
  return ToGrpcStatus(HandleTrim(state_, *request, reply));
}

Status CoordinatorService::trim(const v1::TrimRequest& request, v1::TrimResponse* reply) {
  return HandleTrim(state_, request, reply);
}

grpc::Status CoordinatorService::SetQuota(grpc::ServerContext* context, const v1::SetQuotaRequest* request,
                                          v1::SetQuotaResponse* reply) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "SetQuota"));
  return ToGrpcStatus(quotas_.set_quota(*request, reply));
}

grpc::Status CoordinatorService::Watch(grpc::ServerContext* context, const v1::WatchRequest* request,
                                       grpc::ServerWriter<v1::ClusterSnapshot>* writer) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "Watch"));
  return ToGrpcStatus(HandleWatch(
      state_, *request, [writer](const v1::ClusterSnapshot& s) { return writer->Write(s); },
      [context] { return context->IsCancelled(); }));
}

grpc::Status CoordinatorService::Put(grpc::ServerContext* context, const v1::PutRequest* request,
                                     v1::PutResponse* /*reply*/) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "Put"));
  return ToGrpcStatus(HandlePut(state_, *request));
}

grpc::Status CoordinatorService::Get(grpc::ServerContext* context, const v1::GetRequest* request,
                                     v1::GetResponse* reply) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "Get"));
  return ToGrpcStatus(HandleGet(state_, *request, reply, [context] { return context->IsCancelled(); }));
}

grpc::Status CoordinatorService::Plan(grpc::ServerContext* context, const v1::PlanRequest* request,
                                      v1::PlanReply* reply) {
  MEMCOORD_RETURN_GRPC_IF_ERROR(authenticate(*context, "Plan"));
  return ToGrpcStatus(HandlePlan(state_, *request, reply));
}

}  // namespace memcoord::coordinator
