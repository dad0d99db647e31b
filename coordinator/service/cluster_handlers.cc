// GetCluster, Watch and Plan: reads of the cluster (see rpc_handlers.h).
#include <fmt/format.h>

#include <algorithm>

#include "coordinator/planner/plan_report.h"
#include "coordinator/service/live_plan.h"
#include "coordinator/service/proto_convert.h"
#include "coordinator/service/rpc_handlers.h"

namespace memcoord::coordinator {

Status HandleGetCluster(ServiceState& state, v1::ClusterSnapshot* reply) {
  ToProto(state.snapshot(), reply);
  return Status::Ok();
}

Status HandleWatch(ServiceState& state, const v1::WatchRequest& request,
                   const std::function<bool(const v1::ClusterSnapshot&)>& write,
                   const CancelledFn& cancelled) {
  if (!state.watch_slots.try_take()) {
    return ResourceExhausted(fmt::format(
        "the coordinator serves at most {} Watch streams at once (--max-watches {}); close one or try again "
        "later",
        state.watch_slots.max(), state.watch_slots.max()));
  }
  struct SlotReturn {
    SessionSlots& slots;
    ~SlotReturn() { slots.give_back(); }
  } slot_return{state.watch_slots};
  const std::uint32_t interval_ms =
      request.interval_ms() == 0 ? 1000 : std::clamp<std::uint32_t>(request.interval_ms(), 50, 60000);
  while (!state.stop.raised() && !cancelled()) {
    v1::ClusterSnapshot snapshot;
    ToProto(state.snapshot(), &snapshot);
    if (!write(snapshot)) break;
    state.stop.sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return Status::Ok();
}

Status HandlePlan(ServiceState& state, const v1::PlanRequest& request, v1::PlanReply* reply) {
  MEMCOORD_ASSIGN_OR_RETURN(LivePlan live,
                            PlanOnCluster(request.request_json(), state.cluster.snapshot(Clock::now())));
  reply->set_feasible(live.plan.feasible);
  reply->set_reason(live.plan.reason);
  reply->set_plan_json(planner::PlanToJson(live.request, live.plan).dump(2));
  reply->set_plan_table(planner::PlanToTable(live.request, live.plan));
  for (const LiveDevice& d : live.devices) ToProto(d, reply->add_devices());
  return Status::Ok();
}

}  // namespace memcoord::coordinator
