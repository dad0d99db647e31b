#include "coordinator/planner/model_units.h"

#include "coordinator/planner/output_head.h"

namespace memcoord::planner {
namespace {

// One GPT-2 or BERT block: attention (q, k, v, output projections with biases), two LayerNorms, and the
// feed-forward pair with biases. With kv_heads < heads the k and v projections shrink accordingly.
std::int64_t EncoderStyleBlock(const ModelSpec& s) {
  const std::int64_t h = s.hidden;
  const std::int64_t kv = h / s.heads * s.kv_heads;
  const std::int64_t attention = (h * h + h) * 2 + (h * kv + kv) * 2;
  const std::int64_t mlp = h * s.ffn + s.ffn + s.ffn * h + h;
  return attention + mlp + 4 * h;
}

std::int64_t LlamaAttention(const ModelSpec& s) {
  const std::int64_t h = s.hidden;
  const std::int64_t kv = h / s.heads * s.kv_heads;
  return 2 * h * h + 2 * h * kv;
}

void AddResNetStages(std::vector<ModelUnit>& units) {
  // torchvision resnet50: 7×7 stem, four stages of bottlenecks (1×1, 3×3, 1×1 convs, expansion 4),
  // each conv followed by BatchNorm (weight and bias), a projection shortcut on each stage's first block.
  const auto bottleneck = [](std::int64_t in, std::int64_t width, bool downsample) {
    std::int64_t p =
        in * width + 2 * width + 9 * width * width + 2 * width + width * 4 * width + 2 * 4 * width;
    if (downsample) p += in * 4 * width + 2 * 4 * width;
    return p;
  };
  units.push_back({"stem", UnitKind::kEmbedding, 3 * 64 * 49 + 2 * 64, 3 * 64 * 49, std::nullopt});
  const std::int64_t blocks[4] = {3, 4, 6, 3};
  std::int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const std::int64_t width = std::int64_t{64} << stage;
    std::int64_t params = 0;
    for (std::int64_t b = 0; b < blocks[stage]; ++b) {
      params += bottleneck(b == 0 ? in : 4 * width, width, b == 0);
    }
    in = 4 * width;
    units.push_back(
        {"stage.layer" + std::to_string(stage + 1), UnitKind::kBlock, params, params, std::nullopt});
  }
  units.push_back({"head", UnitKind::kHead, 2048 * 1000 + 1000, 2048 * 1000 + 1000, std::nullopt});
}

// BERT's head: the masked-LM head (transform, LayerNorm, output bias; decoder tied to the word embeddings)
// or the pooler with the two-class classifier.
ModelUnit BertHead(const ModelSpec& s, OutputHead head) {
  const std::int64_t h = s.hidden;
  if (head == OutputHead::kMaskedLm) {
    return {"head", UnitKind::kHead, h * h + 3 * h + s.vocab, h * h + h + s.vocab * h, std::size_t{0}};
  }
  return {"pooler", UnitKind::kHead, h * h + 3 * h + 2, h * h + 3 * h + 2, std::nullopt};
}

ModelUnit LmHead(const ModelSpec& s, OutputHead head) {
  const std::int64_t h = s.hidden;
  if (head == OutputHead::kSequenceClassification) {
    return {"head", UnitKind::kHead, 2 * h, 2 * h, std::nullopt};  // score: h × 2 classes, no bias
  }
  if (s.tied_embeddings) return {"head", UnitKind::kHead, 0, s.vocab * h, std::size_t{0}};
  return {"head", UnitKind::kHead, s.vocab * h, s.vocab * h, std::nullopt};
}

}  // namespace

std::vector<ModelUnit> BuildUnits(const ModelSpec& s, OutputHead requested) {
  std::vector<ModelUnit> units;
  const std::int64_t h = s.hidden;
  const Result<OutputHead> resolved = ResolveHead(s.family, requested);
  const OutputHead head = resolved.ok() ? *resolved : AcceptedHeads(s.family).front();
  switch (s.family) {
    case ModelFamily::kResNet50:
      AddResNetStages(units);
      return units;
    case ModelFamily::kGpt2: {
      units.push_back(
          {"embeddings", UnitKind::kEmbedding, s.vocab * h + s.max_positions * h, 0, std::nullopt});
      const std::int64_t block = EncoderStyleBlock(s);
      for (std::int64_t i = 0; i < s.layers; ++i) {
        units.push_back({"block." + std::to_string(i), UnitKind::kBlock, block, block - 4 * h, std::nullopt});
      }
      units.push_back({"final_norm", UnitKind::kNorm, 2 * h, 0, std::nullopt});
      break;
    }
    case ModelFamily::kBert: {
      units.push_back({"embeddings", UnitKind::kEmbedding,
                       s.vocab * h + s.max_positions * h + s.type_vocab * h + 2 * h, 0, std::nullopt});
      const std::int64_t block = EncoderStyleBlock(s);
      for (std::int64_t i = 0; i < s.layers; ++i) {
        units.push_back({"block." + std::to_string(i), UnitKind::kBlock, block, block - 4 * h, std::nullopt});
      }
      units.push_back(BertHead(s, head));
      return units;
    }
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral: {
      units.push_back({"embeddings", UnitKind::kEmbedding, s.vocab * h, 0, std::nullopt});
      const std::int64_t mlp =
          s.experts * 3 * h * s.ffn + (s.family == ModelFamily::kMixtral ? h * s.experts : 0);
      const std::int64_t matmul = LlamaAttention(s) + mlp;
      for (std::int64_t i = 0; i < s.layers; ++i) {
        units.push_back(
            {"block." + std::to_string(i), UnitKind::kBlock, matmul + 2 * h, matmul, std::nullopt});
      }
      units.push_back({"final_norm", UnitKind::kNorm, h, 0, std::nullopt});
      break;
    }
  }
  units.push_back(LmHead(s, head));
  return units;
}

std::int64_t TotalParams(const std::vector<ModelUnit>& units) {
  std::int64_t total = 0;
  for (const ModelUnit& u : units) total += u.params;
  return total;
}

std::int64_t TotalParams(const ModelSpec& spec, OutputHead head) {
  return TotalParams(BuildUnits(spec, head));
}

}  // namespace memcoord::planner
