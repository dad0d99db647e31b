// The coordinator's unary and streaming RPCs as plain functions over ServiceState: each checks its
// request, calls the core and fills the reply, and returns a memcoord Status (the service maps it to gRPC
// through the one mapping). No gRPC type appears here, so they can be called without a server (tests,
// fuzzing). Authentication and authorization happen before, in the service. SetQuota is QuotaBroker's.
//
//   cluster_handlers.cc    GetCluster, Watch, Plan (reads of the cluster)
//   trim_handler.cc        Trim (synchronized or immediate, through TrimOrchestrator)
//   bootstrap_handlers.cc  Put, Get (the bootstrap key/value store)
//
// Thread safety: all are thread-safe; Trim, Watch, Get and Plan block their caller (bounded).
#pragma once

#include <functional>

#include "coordinator/service/service_state.h"

namespace memcoord::coordinator {

// True when the caller's call was cancelled (polled by the handlers that wait).
using CancelledFn = std::function<bool()>;

Status HandleGetCluster(ServiceState& state, v1::ClusterSnapshot* reply);
// Writes a snapshot every interval until `write` fails, the call is cancelled or the service stops.
// RESOURCE_EXHAUSTED, naming --max-watches, when that many Watch streams are open already.
Status HandleWatch(ServiceState& state, const v1::WatchRequest& request,
                   const std::function<bool(const v1::ClusterSnapshot&)>& write,
                   const CancelledFn& cancelled);
Status HandlePlan(ServiceState& state, const v1::PlanRequest& request, v1::PlanReply* reply);
Status HandleTrim(ServiceState& state, const v1::TrimRequest& request, v1::TrimResponse* reply);
Status HandlePut(ServiceState& state, const v1::PutRequest& request);
Status HandleGet(ServiceState& state, const v1::GetRequest& request, v1::GetResponse* reply,
                 const CancelledFn& cancelled);

}  // namespace memcoord::coordinator
