#include "examples/train/group_plan.h"

#include <algorithm>
#include <chrono>

#include "common/bytes.h"
#include "coordinator/planner/model_packing.h"

namespace memcoord::train {

int GroupPlan::model_of_rank(int rank) const {
  for (std::size_t m = 0; m < group_of_model.size(); ++m) {
    const std::vector<int>& ranks = ranks_of_group[static_cast<std::size_t>(group_of_model[m])];
    if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) return static_cast<int>(m);
  }
  return -1;
}

std::uint64_t ReplicaBytes(const MlpShape& shape, int batch, int eval_batch) {
  std::uint64_t widths = 0;
  for (int w : shape.widths()) widths += static_cast<std::uint64_t>(w);
  const std::uint64_t params = 3ull * shape.parameter_count() * sizeof(float);
  const std::uint64_t train = 2ull * static_cast<std::uint64_t>(batch) * widths * sizeof(float);
  const std::uint64_t eval = static_cast<std::uint64_t>(eval_batch) * widths * sizeof(float);
  return params + std::max(train, eval);
}

Result<GroupPlan> PlanGroups(const std::vector<ModelConfig>& models,
                             const std::vector<std::uint64_t>& rank_capacity, int batch, int eval_batch) {
  const auto start = std::chrono::steady_clock::now();
  const std::size_t n_models = models.size();
  const std::size_t n_ranks = rank_capacity.size();
  if (n_models == 0) return InvalidArgument("at least one model is required");
  if (n_ranks < n_models) {
    return InvalidArgument(std::to_string(n_models) + " models need at least as many ranks; got " +
                           std::to_string(n_ranks) + " (launch more ranks or train fewer models)");
  }
  GroupPlan plan;
  std::size_t next = 0;
  for (std::size_t g = 0; g < n_models; ++g) {
    const std::size_t size = n_ranks / n_models + (g < n_ranks % n_models ? 1 : 0);
    std::vector<int> ranks;
    std::uint64_t capacity = UINT64_MAX;
    for (std::size_t k = 0; k < size; ++k, ++next) {
      ranks.push_back(static_cast<int>(next));
      capacity = std::min(capacity, rank_capacity[next]);
    }
    plan.ranks_of_group.push_back(std::move(ranks));
    plan.group_capacity_bytes.push_back(capacity);
  }
  for (const ModelConfig& m : models) plan.model_bytes.push_back(ReplicaBytes(m.shape, batch, eval_batch));
  Result<planner::Packing> packing = planner::PackWhole(plan.model_bytes, plan.group_capacity_bytes);
  if (!packing.ok()) {
    std::string sizes;
    for (std::size_t m = 0; m < n_models; ++m) {
      sizes += (m ? ", " : "") + models[m].name + " needs " + FormatBytes(plan.model_bytes[m]) + " per rank";
    }
    return Status(packing.status().code(),
                  "the models do not fit their device groups (" + sizes + "): " + packing.status().message());
  }
  std::vector<int> used(n_models, 0);
  for (std::size_t m = 0; m < n_models; ++m) {
    const std::size_t g = packing->device_of[m];
    plan.group_of_model.push_back(static_cast<int>(g));
    if (used[g]++ > 0) {
      return FailedPrecondition("the planner put two models on device group " + std::to_string(g) +
                                "; each group trains one model");
    }
  }
  plan.planning_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

}  // namespace memcoord::train
