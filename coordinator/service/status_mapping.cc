#include "coordinator/service/status_mapping.h"

#include <fmt/format.h>

#include <string>

namespace memcoord::coordinator {

// gRPC sends the message as trailing metadata, whose default limit (8 KiB with every header) refuses a larger
// one: the client would then see RESOURCE_EXHAUSTED about metadata instead of the error.
constexpr std::size_t kMaxMessageBytes = 4096;

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  std::string message = status.message();
  if (message.size() > kMaxMessageBytes) {
    const std::size_t total = message.size();
    message.resize(kMaxMessageBytes);
    message += fmt::format("... ({} bytes in all)", total);
  }
  return grpc::Status(static_cast<grpc::StatusCode>(static_cast<int>(status.code())), message);
}

Status FromGrpcStatus(const grpc::Status& status, std::string_view what) {
  if (status.ok()) return Status::Ok();
  const int code = static_cast<int>(status.error_code());
  const StatusCode mapped = code >= 0 && code <= 16 ? static_cast<StatusCode>(code) : StatusCode::kUnknown;
  return Status(mapped, fmt::format("{}: {}", what, status.error_message()));
}

}  // namespace memcoord::coordinator
