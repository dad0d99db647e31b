// ModelUnits: a model cut into the pieces a placement may put on different devices, in execution order:
// embeddings, one unit per transformer block (or ResNet stage), the final norm, the output head.
// Parameter counts are exact (weights, biases, norms, position embeddings) and sum to the real model's
// total. A head whose weights are tied to the embeddings has zero parameters of its own and names the
// unit it shares them with (`tied_to`): the planner keeps the two on one device and counts them once.
// BERT's masked-LM head has parameters of its own (transform and output bias) and a decoder tied to the
// word embeddings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

enum class UnitKind { kEmbedding, kBlock, kNorm, kHead };

struct ModelUnit {
  std::string name;  // "embeddings", "block.7", "final_norm", "head", "stage.layer3"
  UnitKind kind = UnitKind::kBlock;
  std::int64_t params = 0;
  // Parameters used by matrix multiplies in this unit's forward (cast to 16 bits under autocast).
  std::int64_t matmul_params = 0;
  std::optional<std::size_t> tied_to;  // index of the unit whose weights this one shares
};

// Units of `spec` with output head `head` (kDefault: the family's pretraining head) in execution order.
// REQUIRES: spec came from PresetSpec or ParseModelSpec; head is one AcceptedHeads(spec.family) lists.
std::vector<ModelUnit> BuildUnits(const ModelSpec& spec, OutputHead head = OutputHead::kDefault);

// Sum of unit parameters (tied weights counted once).
std::int64_t TotalParams(const std::vector<ModelUnit>& units);
std::int64_t TotalParams(const ModelSpec& spec, OutputHead head = OutputHead::kDefault);

}  // namespace memcoord::planner
