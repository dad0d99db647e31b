#include "coordinator/planner/parallelism.h"

#include <algorithm>

#include "coordinator/planner/json_fields.h"

namespace memcoord::planner {
namespace {

Status CheckRange(const std::string& field, std::int64_t value, std::int64_t max_value) {
  if (value >= 1 && value <= max_value) return Status::Ok();
  return InvalidArgument(field + " must be between 1 and " + std::to_string(max_value) + ", got " +
                         std::to_string(value));
}

}  // namespace

std::int64_t Parallelism::in_flight(std::int64_t stage) const {
  return std::max<std::int64_t>(1, std::min(pipeline_stages - stage, micro_batches));
}

const std::vector<std::string>& ShardingNames() {
  static const std::vector<std::string> names = {"none", "zero1", "zero2", "zero3", "fsdp"};
  return names;
}

Result<Sharding> ParseSharding(std::string_view name) {
  const std::vector<std::string>& names = ShardingNames();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Sharding>(i);
  }
  const std::string hint = name.substr(0, 4) == "zero" ? " (ZeRO has stages 1, 2 and 3)" : "";
  return InvalidArgument("sharding \"" + std::string(name) + "\" is not accepted" + hint +
                         "; accepted: " + JoinNames(names));
}

std::string_view ShardingName(Sharding s) { return ShardingNames()[static_cast<std::size_t>(s)]; }

Status CheckParallelism(const Parallelism& p, std::int64_t layers, std::int64_t heads, bool training,
                        const std::string& where) {
  MEMCOORD_RETURN_IF_ERROR(CheckRange(where + "data_ranks", p.data_ranks, kMaxRanks));
  MEMCOORD_RETURN_IF_ERROR(CheckRange(where + "tensor_ranks", p.tensor_ranks, kMaxRanks));
  MEMCOORD_RETURN_IF_ERROR(CheckRange(where + "pipeline_stages", p.pipeline_stages, kMaxRanks));
  MEMCOORD_RETURN_IF_ERROR(CheckRange(where + "micro_batches", p.micro_batches, kMaxRanks));
  if (p.sharding != Sharding::kNone && !training) {
    return InvalidArgument(where + "sharding " + std::string(ShardingName(p.sharding)) +
                           " shards training state; accepted in inference: none");
  }
  if (heads == 0 && (p.tensor_ranks > 1 || p.pipeline_stages > 1)) {
    return InvalidArgument(where +
                           "tensor_ranks and pipeline_stages must be 1 for resnet50 (only data "
                           "parallelism is modelled for it)");
  }
  if (heads > 0 && heads % p.tensor_ranks != 0) {
    return InvalidArgument(where + "tensor_ranks " + std::to_string(p.tensor_ranks) +
                           " must divide the model's " + std::to_string(heads) + " attention heads");
  }
  if (p.pipeline_stages > layers && heads > 0) {
    return InvalidArgument(where + "pipeline_stages " + std::to_string(p.pipeline_stages) +
                           " exceeds the model's " + std::to_string(layers) + " layers; accepted: 1.." +
                           std::to_string(layers));
  }
  if (p.micro_batches > 1 && !p.pipelined()) {
    return InvalidArgument(where + "micro_batches " + std::to_string(p.micro_batches) +
                           " needs pipeline_stages > 1 (gradient accumulation alone does not change the "
                           "peak); accepted: 1");
  }
  if (p.pipelined() && !training) {
    return InvalidArgument(where + "pipeline_stages " + std::to_string(p.pipeline_stages) +
                           " is modelled for training only; accepted in inference: 1");
  }
  return Status::Ok();
}

}  // namespace memcoord::planner
