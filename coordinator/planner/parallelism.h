// Parallelism: how one training job spreads over ranks, which decides what each rank holds.
//   data_ranks N    data-parallel replicas (DDP, or the ranks ZeRO/FSDP shard over);
//   sharding        none (each rank holds everything; with N > 1 this is DDP and its gradient buckets
//                   count), zero1/zero2/zero3 (DeepSpeed: optimizer state / + gradients / + parameters
//                   split over N), fsdp (PyTorch FSDP FULL_SHARD, the same three split over N);
//   tensor_ranks T  Megatron-style tensor parallelism: block matmul weights, attention and MLP activations
//                   and the vocabulary-wide logits split over T (norms and the residual stream replicated);
//   pipeline_stages S and micro_batches M: 1F1B pipeline; stage i (0-based) holds activations of up to
//                   min(S - i, M) micro-batches at once, and its gradients accumulate across them.
// `batch` in TrainingOptions is per rank and, with a pipeline, per micro-batch. CheckParallelism refuses
// what cannot be run (zero ranks, ZeRO stage 4, more stages than layers, sharding without data ranks...)
// with INVALID_ARGUMENT naming the field and what is accepted. Plain value; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

enum class Sharding { kNone, kZero1, kZero2, kZero3, kFsdp };

struct Parallelism {
  std::int64_t data_ranks = 1;
  Sharding sharding = Sharding::kNone;
  std::int64_t tensor_ranks = 1;
  std::int64_t pipeline_stages = 1;
  std::int64_t micro_batches = 1;

  bool pipelined() const { return pipeline_stages > 1; }
  // Micro-batches whose activations stage `stage` (0-based) holds at its peak under 1F1B.
  std::int64_t in_flight(std::int64_t stage) const;
};

// "none" | "zero1" | "zero2" | "zero3" | "fsdp" ("zero" followed by another digit names the stages).
Result<Sharding> ParseSharding(std::string_view name);
std::string_view ShardingName(Sharding s);
const std::vector<std::string>& ShardingNames();

// Largest rank count accepted for data, tensor and pipeline ranks and micro-batches.
inline constexpr std::int64_t kMaxRanks = 1 << 20;

// Checks `p` for a model of `layers` blocks and `heads` attention heads (0 for resnet50, which accepts
// no tensor or pipeline parallelism here). Errors name the field as `where` + "data_ranks" etc.
Status CheckParallelism(const Parallelism& p, std::int64_t layers, std::int64_t heads, bool training,
                        const std::string& where = "");

}  // namespace memcoord::planner
