#include "coordinator/planner/training_options.h"

#include "coordinator/planner/json_fields.h"

namespace memcoord::planner {
namespace {

template <typename Enum>
Result<Enum> Lookup(std::string_view field, std::string_view name, const std::vector<std::string>& names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Enum>(i);
  }
  return InvalidArgument(std::string(field) + " \"" + std::string(name) +
                         "\" is not accepted; accepted: " + JoinNames(names));
}

}  // namespace

const std::vector<std::string>& PrecisionNames() {
  static const std::vector<std::string> names = {"fp32", "bf16", "amp-bf16", "amp-fp16"};
  return names;
}
const std::vector<std::string>& OptimizerNames() {
  static const std::vector<std::string> names = {"adamw", "sgd", "sgd-momentum"};
  return names;
}
const std::vector<std::string>& RunModeNames() {
  static const std::vector<std::string> names = {"training", "inference", "generate"};
  return names;
}
const std::vector<std::string>& CheckpointingNames() {
  static const std::vector<std::string> names = {"none", "full"};
  return names;
}

const std::vector<std::string>& OutputHeadNames() {
  static const std::vector<std::string> names = {"default", "causal-lm", "masked-lm",
                                                 "sequence-classification", "image-classification"};
  return names;
}

Result<Precision> ParsePrecision(std::string_view name) {
  return Lookup<Precision>("precision", name, PrecisionNames());
}
Result<Optimizer> ParseOptimizer(std::string_view name) {
  return Lookup<Optimizer>("optimizer", name, OptimizerNames());
}
Result<RunMode> ParseRunMode(std::string_view name) { return Lookup<RunMode>("mode", name, RunModeNames()); }
Result<bool> ParseCheckpointing(std::string_view name) {
  MEMCOORD_ASSIGN_OR_RETURN(int index, Lookup<int>("checkpointing", name, CheckpointingNames()));
  return index == 1;
}

Result<OutputHead> ParseOutputHead(std::string_view name) {
  return Lookup<OutputHead>("head", name, OutputHeadNames());
}

std::string_view PrecisionName(Precision p) { return PrecisionNames()[static_cast<std::size_t>(p)]; }
std::string_view OptimizerName(Optimizer o) { return OptimizerNames()[static_cast<std::size_t>(o)]; }
std::string_view RunModeName(RunMode m) { return RunModeNames()[static_cast<std::size_t>(m)]; }
std::string_view OutputHeadName(OutputHead h) { return OutputHeadNames()[static_cast<std::size_t>(h)]; }

}  // namespace memcoord::planner
