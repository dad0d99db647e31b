// Fuzzes a custom model's JSON (`memcoord estimate --spec FILE`: ParseModelSpec through json_fields): the
// input is the spec object. An accepted spec is estimated and reported for the default training options
// and for a large batch and sequence (where 64-bit byte counts could overflow).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/plan_report.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace planner = memcoord::planner;
  const nlohmann::json doc = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return 0;
  memcoord::Result<planner::ModelSpec> spec = planner::ParseModelSpec(doc);
  if (!spec.ok()) {
    if (spec.status().message().empty()) std::abort();
    return 0;
  }
  planner::TrainingOptions large;
  large.batch = 4096;
  large.seq = 1 << 20;
  for (const planner::TrainingOptions& options : {planner::TrainingOptions{}, large}) {
    memcoord::Result<planner::MemoryEstimate> estimate = planner::EstimateMemory(*spec, options);
    if (!estimate.ok()) {
      if (estimate.status().message().empty()) std::abort();
      continue;
    }
    (void)planner::EstimateToJson(*spec, options, *estimate).dump();
    (void)planner::EstimateToTable(*spec, options, *estimate);
  }
  return 0;
}
