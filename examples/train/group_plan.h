// PlanGroups: which ranks train which model. The world is cut into one contiguous group of ranks per model
// (sizes as even as possible); each model's data-parallel replica (parameters, momentum, gradients, the
// training activations and the evaluation temporaries) must fit on every rank of its group, so a group
// offers the smallest capacity among its ranks. The planner's whole-model packer (PackWhole, min-max load)
// then places each model on a group: with as many groups as models it puts every model on its own group,
// the largest model on the roomiest group. Pure function; thread-safe.
// Errors: INVALID_ARGUMENT (no models, fewer ranks than models); RESOURCE_EXHAUSTED from the planner when a
// model fits no group, naming the model and the bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "examples/train/mlp.h"

namespace memcoord::train {

struct ModelConfig {
  std::string name;
  MlpShape shape;
};

struct GroupPlan {
  std::vector<int> group_of_model;               // per model
  std::vector<std::vector<int>> ranks_of_group;  // per group, ascending world ranks
  std::vector<std::uint64_t> group_capacity_bytes;
  std::vector<std::uint64_t> model_bytes;  // one replica's estimate
  double planning_ms = 0;
  int model_of_rank(int rank) const;
};

// Bytes one replica needs: fp32 parameters x 3 (weights, momentum, gradients) plus activations for `batch`
// rows (forward outputs and backward buffers) plus the forward pass over `eval_batch` rows.
std::uint64_t ReplicaBytes(const MlpShape& shape, int batch, int eval_batch);

Result<GroupPlan> PlanGroups(const std::vector<ModelConfig>& models,
                             const std::vector<std::uint64_t>& rank_capacity, int batch, int eval_batch);

}  // namespace memcoord::train
