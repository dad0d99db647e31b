// Fuzzes the plan request JSON (coordinator/planner: ParsePlanRequest, and through it model_spec and
// json_fields), the text `memcoord plan` and the coordinator's Plan RPC accept. An accepted request is
// planned and reported, as the Plan RPC does; a plan must not put more on a device than it can hold.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "coordinator/planner/placement_planner.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/planner/plan_request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace planner = memcoord::planner;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  memcoord::Result<planner::PlanRequest> request = planner::ParsePlanRequest(text);
  if (!request.ok()) {
    if (request.status().message().empty()) std::abort();
    return 0;
  }
  // The parser accepts up to 65,536 devices and 2^22 devices × models, and it is run on all of them here.
  // Planning (with its advice and reports) costs about devices × models steps: at the limits well under a
  // second in release (planner_tests PlanRequestScaleTest times that), but ASan, UBSan and coverage make
  // it about 50 times slower (65,536 devices × 64 layer-split models: 17 s here), past the fuzzer's 10 s
  // timeout. So requests above 16,384 devices × models (at most about 2.5 s here) are only parsed.
  if (request->devices.size() * request->models.size() > 16384) return 0;
  memcoord::Result<planner::Plan> plan = planner::MakePlan(*request);
  if (!plan.ok()) {
    if (plan.status().message().empty()) std::abort();
    return 0;
  }
  (void)planner::PlanToJson(*request, *plan).dump();
  (void)planner::PlanToTable(*request, *plan);
  if (plan->feasible) {
    if (plan->device_loads_bytes.size() != request->devices.size()) std::abort();
    for (std::size_t d = 0; d < request->devices.size(); ++d) {
      if (plan->device_loads_bytes[d] > request->devices[d].usable_bytes()) std::abort();
    }
  }
  return 0;
}
