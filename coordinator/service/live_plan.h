// PlanOnCluster: the Plan RPC's core (no gRPC): the placement planner run on the cluster's measured memory.
//
// Live devices: one per distinct (host, device ordinal) among live workers that have reported at least
// once; host-backend workers (device -1) each simulate their own device, so for them it is one per (host,
// local rank), as ClusterState keys budgets. A device's capacity is the free memory measured in the latest
// report of any of its ranks (the backend's device_info().free_bytes), with no reserve: the figure is
// already net of the context and of every process on the device. Memory cached but unallocated in the
// device's pools is NOT counted: it is usable only after a trim, so a plan never counts on one; it is
// reported (cached_bytes) so a caller can see what `memcoord trim` would add. Devices with no free memory
// are left out. Devices are listed by host, then ordinal (local rank for the host backend).
//
// Plain functions of their inputs; thread-safe.
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_request.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

std::vector<LiveDevice> LiveDevices(const std::vector<WorkerRecord>& workers);

struct LivePlan {
  planner::PlanRequest request;     // with the devices actually planned on
  planner::Plan plan;               // feasible or not, with the reason
  std::vector<LiveDevice> devices;  // the live devices used; empty when the request named its devices
};

// `request_json` is what `memcoord plan FILE.json` reads; "devices" is optional here. Errors:
// INVALID_ARGUMENT (NOT_FOUND for an unknown preset) naming the field; FAILED_PRECONDITION when the
// request names no devices and no live worker has reported free memory. Bad input is checked first.
Result<LivePlan> PlanOnCluster(std::string_view request_json, const std::vector<WorkerRecord>& workers);

}  // namespace memcoord::coordinator
