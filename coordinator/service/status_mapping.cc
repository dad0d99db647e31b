#include "coordinator/service/status_mapping.h"

#include <fmt/format.h>

namespace memcoord::coordinator {

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())), status.message());
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return Status::Ok();
  const int code = static_cast<int>(status.error_code());
  const StatusCode mapped = code >= 0 && code <= 16 ? static_cast<StatusCode>(code) : StatusCode::kUnknown;
  return Status(mapped, fmt::format("{}: {}", what, status.error_message()));
}

}  // namespace memcoord::coordinator
