// memcoord estimate (--model PRESET | --spec FILE) [--precision P] [--optimizer O] [--batch B] [--seq S]
//                   [--checkpointing none|full] [--mode training|inference|generate] [--new-tokens N]
//                   [--head H] [--data-ranks N] [--sharding none|zero1|zero2|zero3|fsdp]
//                   [--tensor-ranks T] [--pipeline-stages S] [--micro-batches M] [--json | --explain]
// Prints the estimated peak GPU memory of one training step (one inference forward, one generate call) on
// one rank: JSON with total_bytes and a breakdown (bytes as integers) with --json, a table otherwise, and
// with --explain every term by kind and the assumptions behind it. The head assumed is always printed.
// Exit codes: 0 ok, 2 bad usage or input (the message names the option and what is accepted).
#include <charconv>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/command.h"
#include "coordinator/planner/estimate_explain.h"
#include "coordinator/planner/json_fields.h"
#include "coordinator/planner/memory_estimator.h"
#include "coordinator/planner/plan_report.h"
#include "coordinator/planner/plan_request.h"

namespace memcoord::cli {
namespace {

using planner::ModelSpec;
using planner::TrainingOptions;

struct EstimateArgs {
  std::string model;
  std::string spec;
  std::string precision = "fp32";
  std::string optimizer = "adamw";
  std::string batch;
  std::string seq;
  std::string checkpointing = "none";
  std::string mode = "training";
  std::string head = "default";
  std::string new_tokens;
  std::string data_ranks;
  std::string sharding = "none";
  std::string tensor_ranks;
  std::string pipeline_stages;
  std::string micro_batches;
  bool json = false;
  bool explain = false;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "memcoord estimate: %s\n", message.c_str());
  return 2;
}

// A whole decimal integer, or an error naming the option.
Result<std::int64_t> ParseCount(const std::string& option, const std::string& text) {
  std::int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgument(option + " must be a whole number, got \"" + text + "\"");
  }
  return value;
}

// Error messages name JSON fields ("data_ranks"); the command line spells them "--data-ranks".
std::string AsFlag(std::string message) {
  const std::size_t end = message.find_first_of(" .");
  for (std::size_t i = 0; i < end && i < message.size(); ++i) {
    if (message[i] == '_') message[i] = '-';
  }
  return "--" + message;
}

// An optional whole-number option into `value`; an error message naming it otherwise.
std::optional<std::string> ReadCount(const std::string& option, const std::string& text,
                                     std::int64_t& value) {
  if (text.empty()) return std::nullopt;
  Result<std::int64_t> parsed = ParseCount(option, text);
  if (!parsed.ok()) return parsed.status().message();
  value = *parsed;
  return std::nullopt;
}

// The run-shape options: head, generation length, parallelism.
std::optional<std::string> ReadRunShape(const EstimateArgs& args, TrainingOptions& options) {
  Result<planner::OutputHead> head = planner::ParseOutputHead(args.head);
  if (!head.ok()) return "--" + head.status().message();
  options.head = *head;
  Result<planner::Sharding> sharding = planner::ParseSharding(args.sharding);
  if (!sharding.ok()) return "--" + sharding.status().message();
  options.parallel.sharding = *sharding;
  if (auto e = ReadCount("--new-tokens", args.new_tokens, options.new_tokens)) return e;
  if (auto e = ReadCount("--data-ranks", args.data_ranks, options.parallel.data_ranks)) return e;
  if (auto e = ReadCount("--tensor-ranks", args.tensor_ranks, options.parallel.tensor_ranks)) return e;
  if (auto e = ReadCount("--pipeline-stages", args.pipeline_stages, options.parallel.pipeline_stages))
    return e;
  if (auto e = ReadCount("--micro-batches", args.micro_batches, options.parallel.micro_batches)) return e;
  return std::nullopt;
}

int RunEstimate(const EstimateArgs& args) {
  if (args.model.empty() == args.spec.empty()) {
    return Fail("give exactly one of --model PRESET (" + planner::JoinNames(planner::PresetNames()) +
                ") or --spec FILE");
  }
  Result<ModelSpec> spec =
      args.model.empty() ? planner::LoadModelSpecFile(args.spec) : planner::PresetSpec(args.model);
  if (!spec.ok()) return Fail((args.model.empty() ? "--spec: " : "--model: ") + spec.status().message());
  TrainingOptions options;
  Result<planner::Precision> precision = planner::ParsePrecision(args.precision);
  if (!precision.ok()) return Fail("--" + precision.status().message());
  Result<planner::Optimizer> optimizer = planner::ParseOptimizer(args.optimizer);
  if (!optimizer.ok()) return Fail("--" + optimizer.status().message());
  Result<bool> checkpointing = planner::ParseCheckpointing(args.checkpointing);
  if (!checkpointing.ok()) return Fail("--" + checkpointing.status().message());
  Result<planner::RunMode> mode = planner::ParseRunMode(args.mode);
  if (!mode.ok()) return Fail("--" + mode.status().message());
  options.precision = *precision;
  options.optimizer = *optimizer;
  options.checkpointing = *checkpointing;
  options.mode = *mode;
  options.batch = 1;
  options.seq = planner::DefaultSeq(*spec);
  if (!args.batch.empty()) {
    Result<std::int64_t> batch = ParseCount("--batch", args.batch);
    if (!batch.ok()) return Fail(batch.status().message());
    options.batch = *batch;
  }
  if (!args.seq.empty()) {
    Result<std::int64_t> seq = ParseCount("--seq", args.seq);
    if (!seq.ok()) return Fail(seq.status().message());
    options.seq = *seq;
  }
  if (std::optional<std::string> error = ReadRunShape(args, options)) return Fail(*error);
  if (args.json && args.explain) return Fail("--json and --explain: give at most one");
  Result<planner::MemoryEstimate> estimate = planner::EstimateMemory(*spec, options);
  if (!estimate.ok()) return Fail(AsFlag(estimate.status().message()));
  if (args.json) {
    std::printf("%s\n", planner::EstimateToJson(*spec, options, *estimate).dump(2).c_str());
    return 0;
  }
  std::printf("%s", planner::EstimateToTable(*spec, options, *estimate).c_str());
  if (args.explain) std::printf("%s", planner::ExplainEstimate(*spec, options, *estimate).c_str());
  return 0;
}

}  // namespace

Subcommand AddEstimateCommand(CLI::App& root) {
  auto args = std::make_shared<EstimateArgs>();
  CLI::App* app =
      root.add_subcommand("estimate", "Estimate the peak GPU memory of a training step or inference");
  app->add_option("--model", args->model, "Preset: " + planner::JoinNames(planner::PresetNames()));
  app->add_option("--spec", args->spec,
                  "JSON spec file: {\"family\": \"gpt2|bert|llama|mixtral\", \"hidden\", ...}");
  app->add_option("--precision", args->precision, "fp32 | bf16 | amp-bf16 | amp-fp16 (default fp32)");
  app->add_option("--optimizer", args->optimizer, "adamw | sgd | sgd-momentum (default adamw)");
  app->add_option("--batch", args->batch, "Sequences (images for resnet50) per step (default 1)");
  app->add_option("--seq", args->seq, "Tokens per sequence (default 1024, or the position table if smaller)");
  app->add_option("--checkpointing", args->checkpointing, "none | full (default none)");
  app->add_option("--mode", args->mode, "training | inference | generate (default training)");
  app->add_option("--new-tokens", args->new_tokens, "generate: tokens generated per sequence after --seq");
  app->add_option("--head", args->head,
                  "default | causal-lm | masked-lm | sequence-classification | image-classification "
                  "(default: the family's pretraining head)");
  app->add_option("--data-ranks", args->data_ranks,
                  "Data-parallel ranks (DDP, or what --sharding shards over)");
  app->add_option("--sharding", args->sharding, "none | zero1 | zero2 | zero3 | fsdp (default none)");
  app->add_option("--tensor-ranks", args->tensor_ranks, "Tensor-parallel ranks (default 1)");
  app->add_option("--pipeline-stages", args->pipeline_stages, "1F1B pipeline stages (default 1)");
  app->add_option("--micro-batches", args->micro_batches,
                  "Micro-batches of --batch each per step (pipelines)");
  app->add_flag("--json", args->json, "Machine-readable JSON (bytes as integers)");
  app->add_flag("--explain", args->explain, "Every term by kind and the assumptions behind the estimate");
  return {app, [args] { return RunEstimate(*args); }};
}

}  // namespace memcoord::cli
