// ModelSpec: the geometry of one model, enough to count its parameters exactly and estimate its memory.
// Presets reproduce the public configs of well-known models; any other geometry comes from a spec file
// (JSON, see ParseModelSpec). A ModelSpec is a plain value: copy it freely, share it across threads.
// Validation lives in the parsers: a spec returned by them has positive sizes, heads dividing the hidden
// size and kv_heads dividing heads.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace memcoord::planner {

enum class ModelFamily { kGpt2, kBert, kLlama, kMixtral, kResNet50 };

std::string_view ModelFamilyName(ModelFamily family);

struct ModelSpec {
  std::string name;  // preset name or "spec"
  ModelFamily family = ModelFamily::kGpt2;
  std::int64_t hidden = 0;    // model width
  std::int64_t layers = 0;    // transformer blocks
  std::int64_t heads = 0;     // attention heads
  std::int64_t kv_heads = 0;  // key/value heads (grouped-query attention when < heads)
  std::int64_t ffn = 0;       // feed-forward inner width (per expert for mixtral)
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;  // learned position embeddings (gpt2, bert); 0 for rotary families
  std::int64_t type_vocab = 0;     // bert token types
  std::int64_t experts = 1;        // mixtral experts per layer
  std::int64_t experts_per_token = 1;
  bool tied_embeddings = false;  // the output head shares the token-embedding matrix
};

// Names accepted by PresetSpec, in a stable order (for error messages and help).
const std::vector<std::string>& PresetNames();

// The preset of that name; NOT_FOUND naming the accepted presets otherwise.
Result<ModelSpec> PresetSpec(std::string_view name);

// Parses a spec object: {"family": "gpt2|bert|llama|mixtral", "hidden", "layers", "heads", "kv_heads",
// "ffn", "vocab", "experts", "experts_per_token", "tied_embeddings", "max_positions", "type_vocab"}.
// Omitted optional fields take the family's usual values (ffn = 4 × hidden for gpt2/bert, kv_heads = heads).
// Errors are INVALID_ARGUMENT naming the field and what is accepted.
Result<ModelSpec> ParseModelSpec(const nlohmann::json& object);

// Reads and parses a spec file; errors name the file.
Result<ModelSpec> LoadModelSpecFile(const std::string& path);

}  // namespace memcoord::planner
