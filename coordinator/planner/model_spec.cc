#include "coordinator/planner/model_spec.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "coordinator/planner/json_fields.h"
#include "coordinator/planner/limits.h"
#include "coordinator/planner/model_units.h"

namespace memcoord::planner {
namespace {

// What a family fixes unless a preset or a spec says otherwise (the public configs' values).
ModelSpec FamilyDefaults(ModelFamily family) {
  ModelSpec s;
  s.family = family;
  switch (family) {
    case ModelFamily::kGpt2:
      s.max_positions = 1024;
      s.tied_embeddings = true;
      break;
    case ModelFamily::kBert:
      s.max_positions = 512;
      s.type_vocab = 2;
      break;
    case ModelFamily::kMixtral:
      s.experts = 8;
      s.experts_per_token = 2;
      break;
    case ModelFamily::kLlama:
    case ModelFamily::kResNet50:
      break;
  }
  return s;
}

// One row per preset, as in the models' public configs; the rest comes from FamilyDefaults.
struct PresetRow {
  std::string_view name;
  ModelFamily family;
  std::int64_t layers;
  std::int64_t hidden;
  std::int64_t ffn;
  std::int64_t heads;
  std::int64_t kv_heads;
  std::int64_t vocab;
};

constexpr PresetRow kPresetRows[] = {
    {"gpt2", ModelFamily::kGpt2, 12, 768, 3072, 12, 12, 50257},
    {"gpt2-medium", ModelFamily::kGpt2, 24, 1024, 4096, 16, 16, 50257},
    {"gpt2-large", ModelFamily::kGpt2, 36, 1280, 5120, 20, 20, 50257},
    {"gpt2-xl", ModelFamily::kGpt2, 48, 1600, 6400, 25, 25, 50257},
    {"bert-base", ModelFamily::kBert, 12, 768, 3072, 12, 12, 30522},
    {"bert-large", ModelFamily::kBert, 24, 1024, 4096, 16, 16, 30522},
    {"llama2-7b", ModelFamily::kLlama, 32, 4096, 11008, 32, 32, 32000},
    {"llama2-13b", ModelFamily::kLlama, 40, 5120, 13824, 40, 40, 32000},
    {"llama2-70b", ModelFamily::kLlama, 80, 8192, 28672, 64, 8, 32000},
    {"mixtral-8x7b", ModelFamily::kMixtral, 32, 4096, 14336, 32, 8, 32000},
    {"resnet50", ModelFamily::kResNet50, 4, 2048, 0, 0, 0, 1000},  // 4 stages, 2048 features, 1000 classes
};

std::vector<ModelSpec> MakePresets() {
  std::vector<ModelSpec> presets;
  for (const PresetRow& row : kPresetRows) {
    ModelSpec s = FamilyDefaults(row.family);
    s.name = std::string(row.name);
    s.layers = row.layers;
    s.hidden = row.hidden;
    s.ffn = row.ffn;
    s.heads = row.heads;
    s.kv_heads = row.kv_heads;
    s.vocab = row.vocab;
    presets.push_back(std::move(s));
  }
  return presets;
}

const std::vector<ModelSpec>& Presets() {
  static const std::vector<ModelSpec> presets = MakePresets();
  return presets;
}

// 16M: far above any real width; a product of two dimensions and the expert count fits in int64.
constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;

// Every unit's count fits in int64 within the per-field limits; their sum over up to 100,000 layers may
// not, so it is taken in double and held to kMaxParams, which keeps TotalParams exact for accepted specs.
Status CheckParameterCount(const ModelSpec& s) {
  double total = 0;
  for (const ModelUnit& u : BuildUnits(s)) total += static_cast<double>(u.params);
  if (total <= static_cast<double>(kMaxParams)) return Status::Ok();
  char about[32];
  std::snprintf(about, sizeof(about), "%.2g", total);
  return InvalidArgument("spec: hidden " + std::to_string(s.hidden) + ", ffn " + std::to_string(s.ffn) +
                         ", experts " + std::to_string(s.experts) + ", layers " + std::to_string(s.layers) +
                         " and vocab " + std::to_string(s.vocab) + " make about " + about +
                         " parameters; accepted: at most " + std::to_string(kMaxParams) + " (2^48)");
}

}  // namespace

std::string_view ModelFamilyName(ModelFamily family) {
  switch (family) {
    case ModelFamily::kGpt2:
      return "gpt2";
    case ModelFamily::kBert:
      return "bert";
    case ModelFamily::kLlama:
      return "llama";
    case ModelFamily::kMixtral:
      return "mixtral";
    case ModelFamily::kResNet50:
      return "resnet50";
  }
  return "unknown";
}

const std::vector<std::string>& PresetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const ModelSpec& s : Presets()) out.push_back(s.name);
    return out;
  }();
  return names;
}

Result<ModelSpec> PresetSpec(std::string_view name) {
  for (const ModelSpec& s : Presets()) {
    if (s.name == name) return s;
  }
  return NotFound("unknown model preset \"" + std::string(name) +
                  "\"; accepted: " + JoinNames(PresetNames()) + " (or a spec file)");
}

Result<ModelSpec> ParseModelSpec(const nlohmann::json& object) {
  if (!object.is_object()) return InvalidArgument("spec must be a JSON object, got " + ShortJson(object));
  MEMCOORD_RETURN_IF_ERROR(
      CheckKnownKeys(object, "spec",
                     {"family", "name", "hidden", "layers", "heads", "kv_heads", "ffn", "vocab", "experts",
                      "experts_per_token", "tied_embeddings", "max_positions", "type_vocab"}));
  MEMCOORD_ASSIGN_OR_RETURN(std::string family, ReadString(object, "spec", "family", std::nullopt,
                                                           {"gpt2", "bert", "llama", "mixtral"}));
  const ModelSpec defaults = FamilyDefaults(family == "gpt2"    ? ModelFamily::kGpt2
                                            : family == "bert"  ? ModelFamily::kBert
                                            : family == "llama" ? ModelFamily::kLlama
                                                                : ModelFamily::kMixtral);
  ModelSpec s = defaults;
  MEMCOORD_ASSIGN_OR_RETURN(s.name, ReadString(object, "spec", "name", std::string("spec")));
  const bool learned_positions = s.family == ModelFamily::kGpt2 || s.family == ModelFamily::kBert;
  MEMCOORD_ASSIGN_OR_RETURN(s.hidden, ReadInt(object, "spec", "hidden", std::nullopt, 1, kMaxDim));
  MEMCOORD_ASSIGN_OR_RETURN(s.layers, ReadInt(object, "spec", "layers", std::nullopt, 1, 100000));
  MEMCOORD_ASSIGN_OR_RETURN(s.heads, ReadInt(object, "spec", "heads", std::nullopt, 1, kMaxDim));
  MEMCOORD_ASSIGN_OR_RETURN(s.kv_heads, ReadInt(object, "spec", "kv_heads", s.heads, 1, kMaxDim));
  MEMCOORD_ASSIGN_OR_RETURN(
      s.ffn,
      ReadInt(object, "spec", "ffn",
              learned_positions ? std::optional<std::int64_t>(4 * s.hidden) : std::nullopt, 1, kMaxDim));
  MEMCOORD_ASSIGN_OR_RETURN(s.vocab, ReadInt(object, "spec", "vocab", std::nullopt, 1, kMaxDim));
  const bool moe = s.family == ModelFamily::kMixtral;
  MEMCOORD_ASSIGN_OR_RETURN(s.experts, ReadInt(object, "spec", "experts", defaults.experts, 1, 1024));
  MEMCOORD_ASSIGN_OR_RETURN(
      s.experts_per_token, ReadInt(object, "spec", "experts_per_token", defaults.experts_per_token, 1, 1024));
  MEMCOORD_ASSIGN_OR_RETURN(s.tied_embeddings,
                            ReadBool(object, "spec", "tied_embeddings", defaults.tied_embeddings));
  MEMCOORD_ASSIGN_OR_RETURN(s.max_positions,
                            ReadInt(object, "spec", "max_positions", defaults.max_positions, 0, kMaxDim));
  MEMCOORD_ASSIGN_OR_RETURN(s.type_vocab,
                            ReadInt(object, "spec", "type_vocab", defaults.type_vocab, 0, kMaxDim));
  if (s.hidden % s.heads != 0) {
    return InvalidArgument("spec.heads (" + std::to_string(s.heads) + ") must divide spec.hidden (" +
                           std::to_string(s.hidden) + ")");
  }
  if (s.heads % s.kv_heads != 0) {
    return InvalidArgument("spec.kv_heads (" + std::to_string(s.kv_heads) + ") must divide spec.heads (" +
                           std::to_string(s.heads) + ")");
  }
  if (s.experts_per_token > s.experts) {
    return InvalidArgument("spec.experts_per_token (" + std::to_string(s.experts_per_token) +
                           ") must not exceed spec.experts (" + std::to_string(s.experts) + ")");
  }
  if (!moe && s.experts != 1) {
    return InvalidArgument("spec.experts is only accepted for family \"mixtral\"");
  }
  if (s.family == ModelFamily::kBert && s.tied_embeddings) {
    return InvalidArgument("spec.tied_embeddings: the bert family has no output head to tie (use false)");
  }
  MEMCOORD_RETURN_IF_ERROR(CheckParameterCount(s));
  return s;
}

Result<ModelSpec> LoadModelSpecFile(const std::string& path) {
  MEMCOORD_ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "spec file"));
  MEMCOORD_ASSIGN_OR_RETURN(
      const nlohmann::json object,
      ParseJson(text, "spec file \"" + path + "\"", "a spec object {\"family\", \"hidden\", ...}"));
  Result<ModelSpec> spec = ParseModelSpec(object);
  if (!spec.ok()) return spec.status().WithContext("spec file \"" + path + "\": ");
  return spec;
}

}  // namespace memcoord::planner
