#include "coordinator/service/coordinator_client.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <fstream>

#include "common/token.h"
#include "coordinator/service/proto_convert.h"
#include "coordinator/service/status_mapping.h"
#include "memcoord/v1/coordinator.grpc.pb.h"

namespace memcoord::coordinator {

Result<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound(fmt::format("cannot read token file '{}'", path));
  std::string token;
  std::getline(in, token);
  const auto first = token.find_first_not_of(" \t\r\n");
  const auto last = token.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) return InvalidArgument(fmt::format("token file '{}' is empty", path));
  token = token.substr(first, last - first + 1);
  MEMCOORD_RETURN_IF_ERROR(CheckToken(token, fmt::format("token file '{}'", path)));
  return token;
}

namespace {

std::shared_ptr<grpc::ChannelCredentials> ChannelCredentials(const ClientOptions& options) {
  if (options.ca_pem.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = options.ca_pem;
  ssl.pem_cert_chain = options.cert_pem;  // both empty: no client certificate
  ssl.pem_private_key = options.key_pem;
  return grpc::SslCredentials(ssl);
}

}  // namespace

class CoordinatorClient::Impl {
 public:
  explicit Impl(const ClientOptions& client_options)
      : options(client_options),
        stub(v1::Coordinator::NewStub(
            grpc::CreateChannel(client_options.address, ChannelCredentials(client_options)))) {}

  void prepare(grpc::ClientContext* context, std::chrono::milliseconds timeout) const {
    context->set_deadline(std::chrono::system_clock::now() + timeout);
    if (!options.token.empty()) context->AddMetadata("authorization", "Bearer " + options.token);
  }
  std::string what(const char* call) const { return fmt::format("{} {}", call, options.address); }

  const ClientOptions options;
  std::unique_ptr<v1::Coordinator::Stub> stub;
};

CoordinatorClient::CoordinatorClient(const ClientOptions& options) : impl_(std::make_unique<Impl>(options)) {}

CoordinatorClient::~CoordinatorClient() = default;

Result<ClusterView> CoordinatorClient::GetCluster() {
  grpc::ClientContext context;
  impl_->prepare(&context, impl_->options.timeout);
  v1::ClusterSnapshot reply;
  grpc::Status status = impl_->stub->GetCluster(&context, v1::GetClusterRequest(), &reply);
  if (!status.ok()) return FromGrpcStatus(status, impl_->what("GetCluster"));
  return FromProto(reply);
}

Result<TrimOutcome> CoordinatorClient::Trim(const TrimSpec& spec, const std::string& group) {
  v1::TrimRequest request;
  request.set_target_bytes(spec.target_bytes);
  request.set_now(spec.now);
  request.set_pool(spec.pool);
  request.set_group(group);
  request.set_deadline_ms(static_cast<std::uint32_t>(spec.deadline.count()));
  grpc::ClientContext context;
  // Deadline 0: the coordinator scales it (trim_orchestrator.h), up to kMaxTrimDeadline.
  impl_->prepare(&context,
                 impl_->options.timeout + (spec.deadline.count() > 0 ? spec.deadline : kMaxTrimDeadline));
  v1::TrimResponse reply;
  grpc::Status status = impl_->stub->Trim(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, impl_->what("Trim"));
  TrimOutcome out;
  out.step = reply.step();
  out.complete = reply.complete();
  for (const v1::TrimAck& a : reply.acks()) {
    RankAck ack;
    ack.rank = a.rank();
    ack.step = a.step();
    ack.released_bytes = a.released_bytes();
    ack.duration_ms = a.duration_ms();
    ack.code = a.code();
    ack.message = a.message();
    out.acks.push_back(ack);
  }
  out.missing_ranks.assign(reply.missing_ranks().begin(), reply.missing_ranks().end());
  out.released_bytes = reply.released_bytes();
  out.fanout_ms = reply.fanout_ms();
  out.total_ms = reply.total_ms();
  out.deadline = std::chrono::milliseconds(reply.deadline_ms());
  out.late_ranks.assign(reply.late_ranks().begin(), reply.late_ranks().end());
  out.failed_ranks.assign(reply.failed_ranks().begin(), reply.failed_ranks().end());
  return out;
}

Result<std::vector<QuotaChange>> CoordinatorClient::SetQuota(int rank, const std::string& pool,
                                                             std::int64_t limit_bytes) {
  v1::SetQuotaRequest request;
  request.set_rank(rank);
  request.set_pool(pool);
  request.set_limit_bytes(limit_bytes);
  grpc::ClientContext context;
  impl_->prepare(&context, impl_->options.timeout);
  v1::SetQuotaResponse reply;
  grpc::Status status = impl_->stub->SetQuota(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, impl_->what("SetQuota"));
  std::vector<QuotaChange> out;
  for (const v1::QuotaAssignment& a : reply.assignments()) {
    out.push_back(QuotaChange{a.rank(), a.pool(), a.limit_bytes(), false});
  }
  return out;
}

Status CoordinatorClient::Watch(std::uint32_t interval_ms,
                                const std::function<bool(const ClusterView&)>& on_snapshot) {
  v1::WatchRequest request;
  request.set_interval_ms(interval_ms);
  grpc::ClientContext context;
  if (!impl_->options.token.empty()) {
    context.AddMetadata("authorization", "Bearer " + impl_->options.token);
  }
  auto reader = impl_->stub->Watch(&context, request);
  v1::ClusterSnapshot snapshot;
  while (reader->Read(&snapshot)) {
    if (!on_snapshot(FromProto(snapshot))) {
      context.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  if (status.error_code() == grpc::StatusCode::CANCELLED) return Status::Ok();
  return FromGrpcStatus(status, impl_->what("Watch"));
}

Status CoordinatorClient::Put(const std::string& key, const std::string& value) {
  v1::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  grpc::ClientContext context;
  impl_->prepare(&context, impl_->options.timeout);
  v1::PutResponse reply;
  return FromGrpcStatus(impl_->stub->Put(&context, request, &reply), impl_->what("Put"));
}

Result<std::string> CoordinatorClient::Get(const std::string& key, std::uint32_t wait_ms) {
  v1::GetRequest request;
  request.set_key(key);
  request.set_wait_ms(wait_ms);
  grpc::ClientContext context;
  impl_->prepare(&context, impl_->options.timeout + std::chrono::milliseconds(wait_ms));
  v1::GetResponse reply;
  grpc::Status status = impl_->stub->Get(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, impl_->what("Get"));
  return reply.value();
}

Result<RemotePlan> CoordinatorClient::Plan(const std::string& request_json) {
  v1::PlanRequest request;
  request.set_request_json(request_json);
  grpc::ClientContext context;
  impl_->prepare(&context, std::max(impl_->options.timeout, std::chrono::milliseconds(30000)));
  v1::PlanReply reply;
  grpc::Status status = impl_->stub->Plan(&context, request, &reply);
  if (!status.ok()) return FromGrpcStatus(status, impl_->what("Plan"));
  RemotePlan out;
  out.feasible = reply.feasible();
  out.reason = reply.reason();
  out.plan_json = reply.plan_json();
  out.plan_table = reply.plan_table();
  for (const v1::LiveDevice& d : reply.devices()) out.devices.push_back(FromProto(d));
  return out;
}

}  // namespace memcoord::coordinator
