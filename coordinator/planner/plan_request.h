// PlanRequest: what `memcoord plan FILE.json` asks for, parsed and validated.
//   {"devices": {"count": 8, "capacity": "80GB", "reserve": "2GB"}
//               or [{"name": "gpu0", "capacity": "80GB", "reserve": "1GiB"}, ...],
//    "models": [{"name": "lm", "preset": "llama2-7b" | "spec": {...}, "precision": "bf16",
//                "mode": "training|inference", "optimizer": "adamw", "batch": 8, "seq": 2048,
//                "checkpointing": "none|full", "split": "layers|whole", "head": "causal-lm|masked-lm|...",
//                "new_tokens": 128, "data_ranks": 8, "sharding": "none|zero1|zero2|zero3|fsdp",
//                "tensor_ranks": 1, "micro_batches": 8}]}
// "micro_batches" on a layer-split model makes the devices, in order, the stages of a 1F1B pipeline:
// stage i holds activations of min(stages - i, micro_batches) micro-batches of `batch` sequences, and the
// split balances that (pipeline_split.h).
// Defaults: precision fp32, optimizer adamw, checkpointing none, split layers for a single model and whole
// otherwise; training batch 1 and seq 1024 (capped by a learned position table); inference batch 0 and seq 0
// (weights only) unless given. Every error is INVALID_ARGUMENT (NOT_FOUND for an unknown preset) naming the
// field ("models[1].precision") and what is accepted; limits.h bounds every size and count. Plain values;
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

struct DeviceSpec {
  std::string name;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t reserve_bytes = 0;  // kept free (CUDA context, other processes)
  std::uint64_t usable_bytes() const { return capacity_bytes - reserve_bytes; }
};

enum class SplitKind { kLayers, kWhole };

struct ModelRequest {
  std::string name;
  ModelSpec spec;
  TrainingOptions options;
  SplitKind split = SplitKind::kLayers;
  bool pipeline = false;  // "micro_batches" given: a 1F1B pipeline over the devices
};

struct PlanRequest {
  std::vector<DeviceSpec> devices;
  std::vector<ModelRequest> models;
};

Result<PlanRequest> ParsePlanRequest(std::string_view json_text);
Result<PlanRequest> LoadPlanRequest(const std::string& path);

// Device and model-count limits (limits.h), shared by the parser and MakePlan (requests built in memory):
// capacity in 1..kMaxDeviceBytes, reserve below capacity; errors start with `where` ("devices[2]").
Status CheckDevice(const DeviceSpec& device, const std::string& where);
// At most kMaxDevices devices: "devices: N devices; accepted: at most 65536".
Status CheckDeviceCount(std::size_t count);
// At most kMaxModels models.
Status CheckModelCount(std::size_t count);
// At most kMaxDeviceModelPairs devices × models: "devices × models: 65536 devices × 1024 models = ...".
Status CheckPlanSize(std::size_t devices, std::size_t models);
// At most kMaxPlanLayers layers over all models, and at most kMaxPipelineStages devices when a model is
// pipelined ("micro_batches"), naming the model.
Status CheckPlanModels(const PlanRequest& request);

// Default sequence length for a model when none is given: 1024, capped by a learned position table.
std::int64_t DefaultSeq(const ModelSpec& spec);

}  // namespace memcoord::planner
