// The one mapping between memcoord's Status and grpc::Status (the codes share gRPC's numbering). Every
// handler returns ToGrpcStatus(...) of a core result; every client call turns grpc::Status back with
// FromGrpcStatus, so callers see one error type. Included only by .cc files (it pulls in gRPC headers).
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace memcoord::coordinator {

grpc::Status ToGrpcStatus(const Status& status);
// `what` names the call for the message ("GetCluster 127.0.0.1:5000").
Status FromGrpcStatus(const grpc::Status& status, std::string_view what);

}  // namespace memcoord::coordinator

// In a gRPC handler: returns ToGrpcStatus(expr) when `expr` (a memcoord Status) is not OK.
#define MEMCOORD_RETURN_GRPC_IF_ERROR(expr)                                               \
  do {                                                                                    \
    if (::memcoord::Status memcoord_grpc_status_ = (expr); !memcoord_grpc_status_.ok()) { \
      return ::memcoord::coordinator::ToGrpcStatus(memcoord_grpc_status_);                \
    }                                                                                     \
  } while (0)
