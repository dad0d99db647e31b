#include "coordinator/planner/plan_request.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "coordinator/planner/json_fields.h"
#include "coordinator/planner/limits.h"

namespace memcoord::planner {
namespace {

Result<DeviceSpec> ParseDevice(const nlohmann::json& d, const std::string& where, std::string default_name) {
  if (!d.is_object())
    return InvalidArgument(where + " must be an object {\"name\", \"capacity\", \"reserve\"}");
  MEMCOORD_RETURN_IF_ERROR(CheckKnownKeys(d, where, {"name", "capacity", "reserve"}));
  DeviceSpec device;
  MEMCOORD_ASSIGN_OR_RETURN(device.name, ReadString(d, where, "name", std::move(default_name)));
  MEMCOORD_ASSIGN_OR_RETURN(device.capacity_bytes, ReadBytes(d, where, "capacity", std::nullopt));
  MEMCOORD_ASSIGN_OR_RETURN(device.reserve_bytes, ReadBytes(d, where, "reserve", std::uint64_t{0}));
  MEMCOORD_RETURN_IF_ERROR(CheckDevice(device, where));
  return device;
}

// One pass with a hash map: a pairwise check took 8 s at 130,000 devices (fuzzer timeout).
Status CheckUniqueNames(const std::vector<DeviceSpec>& devices) {
  std::unordered_map<std::string_view, std::size_t> first_use;
  first_use.reserve(devices.size());
  for (std::size_t i = 0; i < devices.size(); ++i) {
    auto [it, inserted] = first_use.emplace(devices[i].name, i);
    if (!inserted) {
      return InvalidArgument("devices[" + std::to_string(i) + "].name \"" + devices[i].name +
                             "\" is used twice (also devices[" + std::to_string(it->second) + "])");
    }
  }
  return Status::Ok();
}

Result<std::vector<DeviceSpec>> ParseDevices(const nlohmann::json& root) {
  auto it = root.find("devices");
  if (it == root.end()) {
    return InvalidArgument(
        "devices is required: {\"count\": N, \"capacity\": \"80GB\"} or a list of "
        "{\"name\", \"capacity\", \"reserve\"}");
  }
  std::vector<DeviceSpec> devices;
  if (it->is_object()) {
    MEMCOORD_RETURN_IF_ERROR(CheckKnownKeys(*it, "devices", {"count", "capacity", "reserve", "name"}));
    MEMCOORD_ASSIGN_OR_RETURN(std::int64_t count, ReadInt(*it, "devices", "count", std::nullopt, 1,
                                                          static_cast<std::int64_t>(kMaxDevices)));
    nlohmann::json one = *it;
    one.erase("count");
    MEMCOORD_ASSIGN_OR_RETURN(std::string prefix, ReadString(*it, "devices", "name", std::string("gpu")));
    one.erase("name");
    for (std::int64_t i = 0; i < count; ++i) {
      MEMCOORD_ASSIGN_OR_RETURN(DeviceSpec d, ParseDevice(one, "devices", prefix + std::to_string(i)));
      devices.push_back(std::move(d));
    }
  } else if (it->is_array()) {
    if (it->empty()) return InvalidArgument("devices must list at least one device, got []");
    MEMCOORD_RETURN_IF_ERROR(CheckDeviceCount(it->size()));
    for (std::size_t i = 0; i < it->size(); ++i) {
      MEMCOORD_ASSIGN_OR_RETURN(DeviceSpec d, ParseDevice((*it)[i], "devices[" + std::to_string(i) + "]",
                                                          "gpu" + std::to_string(i)));
      devices.push_back(std::move(d));
    }
  } else {
    return InvalidArgument("devices must be {\"count\": N, \"capacity\": \"80GB\"} or a list, got " +
                           it->dump());
  }
  MEMCOORD_RETURN_IF_ERROR(CheckUniqueNames(devices));
  return devices;
}

// The head, generation length and parallelism fields; the estimator checks them against the model.
Status ParseRunShape(const nlohmann::json& m, const std::string& where, ModelRequest& r) {
  MEMCOORD_ASSIGN_OR_RETURN(std::string head,
                            ReadString(m, where, "head", std::string("default"), OutputHeadNames()));
  r.options.head = *ParseOutputHead(head);
  MEMCOORD_ASSIGN_OR_RETURN(r.options.new_tokens, ReadInt(m, where, "new_tokens", 0, 0, 1 << 24));
  Parallelism& p = r.options.parallel;
  MEMCOORD_ASSIGN_OR_RETURN(p.data_ranks, ReadInt(m, where, "data_ranks", 1, 1, kMaxRanks));
  MEMCOORD_ASSIGN_OR_RETURN(p.tensor_ranks, ReadInt(m, where, "tensor_ranks", 1, 1, kMaxRanks));
  MEMCOORD_ASSIGN_OR_RETURN(p.micro_batches, ReadInt(m, where, "micro_batches", 1, 1, kMaxRanks));
  MEMCOORD_ASSIGN_OR_RETURN(std::string sharding,
                            ReadString(m, where, "sharding", std::string("none"), ShardingNames()));
  p.sharding = *ParseSharding(sharding);
  r.pipeline = m.contains("micro_batches");
  if (r.pipeline && r.split != SplitKind::kLayers) {
    return InvalidArgument(where +
                           ".micro_batches needs \"split\": \"layers\" (the devices are the pipeline's "
                           "stages)");
  }
  return Status::Ok();
}

Result<ModelRequest> ParseModel(const nlohmann::json& m, const std::string& where, std::size_t count) {
  if (!m.is_object()) return InvalidArgument(where + " must be an object with \"preset\" or \"spec\"");
  MEMCOORD_RETURN_IF_ERROR(CheckKnownKeys(
      m, where,
      {"name", "preset", "spec", "precision", "mode", "optimizer", "batch", "seq", "checkpointing", "split",
       "head", "new_tokens", "data_ranks", "sharding", "tensor_ranks", "micro_batches"}));
  ModelRequest r;
  const bool has_preset = m.contains("preset");
  const bool has_spec = m.contains("spec");
  if (has_preset == has_spec) {
    return InvalidArgument(where + " needs exactly one of \"preset\" (" + JoinNames(PresetNames()) +
                           ") or \"spec\" (an object)");
  }
  if (has_preset) {
    MEMCOORD_ASSIGN_OR_RETURN(std::string preset, ReadString(m, where, "preset", std::nullopt));
    Result<ModelSpec> spec = PresetSpec(preset);
    if (!spec.ok()) return spec.status().WithContext(where + ".preset: ");
    r.spec = *spec;
  } else {
    Result<ModelSpec> spec = ParseModelSpec(m["spec"]);
    if (!spec.ok()) return spec.status().WithContext(where + ": ");
    r.spec = *spec;
  }
  MEMCOORD_ASSIGN_OR_RETURN(r.name, ReadString(m, where, "name", r.spec.name));
  MEMCOORD_ASSIGN_OR_RETURN(std::string precision,
                            ReadString(m, where, "precision", std::string("fp32"), PrecisionNames()));
  MEMCOORD_ASSIGN_OR_RETURN(std::string mode,
                            ReadString(m, where, "mode", std::string("training"), RunModeNames()));
  MEMCOORD_ASSIGN_OR_RETURN(std::string optimizer,
                            ReadString(m, where, "optimizer", std::string("adamw"), OptimizerNames()));
  MEMCOORD_ASSIGN_OR_RETURN(std::string ckpt,
                            ReadString(m, where, "checkpointing", std::string("none"), CheckpointingNames()));
  MEMCOORD_ASSIGN_OR_RETURN(
      std::string split,
      ReadString(m, where, "split", std::string(count == 1 ? "layers" : "whole"), {"layers", "whole"}));
  r.options.precision = *ParsePrecision(precision);
  r.options.mode = *ParseRunMode(mode);
  r.options.optimizer = *ParseOptimizer(optimizer);
  r.options.checkpointing = *ParseCheckpointing(ckpt);
  r.split = split == "layers" ? SplitKind::kLayers : SplitKind::kWhole;
  const bool training = r.options.mode == RunMode::kTraining;
  MEMCOORD_ASSIGN_OR_RETURN(r.options.batch,
                            ReadInt(m, where, "batch", training ? 1 : 0, training ? 1 : 0, 1 << 24));
  MEMCOORD_ASSIGN_OR_RETURN(
      r.options.seq, ReadInt(m, where, "seq", training ? DefaultSeq(r.spec) : 0, training ? 1 : 0, 1 << 24));
  if (!training && r.options.batch > 0 && r.options.seq == 0 && r.spec.family != ModelFamily::kResNet50) {
    r.options.seq = DefaultSeq(r.spec);
  }
  MEMCOORD_RETURN_IF_ERROR(ParseRunShape(m, where, r));
  return r;
}

}  // namespace

Status CheckDevice(const DeviceSpec& device, const std::string& where) {
  if (device.capacity_bytes == 0) return InvalidArgument(where + ".capacity must be positive, got 0");
  if (device.capacity_bytes > kMaxDeviceBytes) {
    return InvalidArgument(where + ".capacity must be at most " + std::to_string(kMaxDeviceBytes) +
                           " bytes (2^60, 1 EiB), got " + std::to_string(device.capacity_bytes));
  }
  if (device.reserve_bytes >= device.capacity_bytes) {
    return InvalidArgument(where + ".reserve (" + std::to_string(device.reserve_bytes) +
                           " bytes) must be smaller than its capacity (" +
                           std::to_string(device.capacity_bytes) + " bytes)");
  }
  return Status::Ok();
}

Status CheckDeviceCount(std::size_t count) {
  if (count <= kMaxDevices) return Status::Ok();
  return InvalidArgument("devices: " + std::to_string(count) + " devices; accepted: at most " +
                         std::to_string(kMaxDevices));
}

Status CheckModelCount(std::size_t count) {
  if (count <= kMaxModels) return Status::Ok();
  return InvalidArgument("models: " + std::to_string(count) + " models; accepted: at most " +
                         std::to_string(kMaxModels));
}

Status CheckPlanSize(std::size_t devices, std::size_t models) {
  if (devices * models <= kMaxDeviceModelPairs) return Status::Ok();
  return InvalidArgument("devices × models: " + std::to_string(devices) + " devices × " +
                         std::to_string(models) + " models = " + std::to_string(devices * models) +
                         "; accepted: at most " + std::to_string(kMaxDeviceModelPairs) +
                         " (e.g. 65536 devices with 64 models, or 4096 devices with 1024 models)");
}

Status CheckPlanModels(const PlanRequest& request) {
  std::int64_t layers = 0;
  for (const ModelRequest& m : request.models) layers += m.spec.layers;
  if (layers > kMaxPlanLayers) {
    return InvalidArgument("models: " + std::to_string(layers) + " layers in " +
                           std::to_string(request.models.size()) + " model(s) together; accepted: at most " +
                           std::to_string(kMaxPlanLayers) + " layers in one plan");
  }
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    if (!request.models[i].pipeline || request.devices.size() <= kMaxPipelineStages) continue;
    return InvalidArgument("models[" + std::to_string(i) +
                           "].micro_batches: a pipelined model has one stage on each device, and the plan "
                           "lists " +
                           std::to_string(request.devices.size()) + " devices; accepted: at most " +
                           std::to_string(kMaxPipelineStages) + " devices in a plan with a pipelined model");
  }
  return Status::Ok();
}

std::int64_t DefaultSeq(const ModelSpec& spec) {
  if (spec.family == ModelFamily::kResNet50) return 1;
  return spec.max_positions > 0 ? std::min<std::int64_t>(1024, spec.max_positions) : 1024;
}

Result<PlanRequest> ParsePlanRequest(std::string_view json_text) {
  MEMCOORD_ASSIGN_OR_RETURN(const nlohmann::json root,
                            ParseJson(json_text, "the plan file", "{\"devices\": ..., \"models\": [...]}"));
  if (!root.is_object())
    return InvalidArgument("the plan file must hold a JSON object with \"devices\" and \"models\"");
  MEMCOORD_RETURN_IF_ERROR(CheckKnownKeys(root, "", {"devices", "models"}));
  PlanRequest request;
  MEMCOORD_ASSIGN_OR_RETURN(request.devices, ParseDevices(root));
  auto models = root.find("models");
  if (models == root.end() || !models->is_array() || models->empty()) {
    return InvalidArgument(
        "models must be a non-empty list of {\"preset\" or \"spec\", \"precision\", \"mode\", "
        "\"split\", ...}");
  }
  MEMCOORD_RETURN_IF_ERROR(CheckModelCount(models->size()));
  MEMCOORD_RETURN_IF_ERROR(CheckPlanSize(request.devices.size(), models->size()));
  for (std::size_t i = 0; i < models->size(); ++i) {
    MEMCOORD_ASSIGN_OR_RETURN(ModelRequest m,
                              ParseModel((*models)[i], "models[" + std::to_string(i) + "]", models->size()));
    request.models.push_back(std::move(m));
  }
  MEMCOORD_RETURN_IF_ERROR(CheckPlanModels(request));
  return request;
}

Result<PlanRequest> LoadPlanRequest(const std::string& path) {
  MEMCOORD_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "plan file"));
  Result<PlanRequest> request = ParsePlanRequest(text);
  if (!request.ok()) return request.status().WithContext("plan file \"" + path + "\": ");
  return request;
}

}  // namespace memcoord::planner
