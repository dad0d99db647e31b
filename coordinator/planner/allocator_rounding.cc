#include "coordinator/planner/allocator_rounding.h"

#include <cmath>
#include <vector>

namespace memcoord::planner {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kMinOwnSegment = 10 * kMiB;   // kMinLargeAlloc
constexpr double kSegmentRounding = 2 * kMiB;  // kRoundLarge
constexpr double kMaxUnsplit = 1 * kMiB;       // kSmallSize: a larger remainder is split off

// Element counts of the weight matrices of one unit (biases and norms stay far below 10 MiB), whole.
std::vector<double> UnitTensors(const ModelSpec& s, const ModelUnit& u, OutputHead head) {
  const double h = static_cast<double>(s.hidden);
  const double v = static_cast<double>(s.vocab);
  const double f = static_cast<double>(s.ffn);
  const double kv = h / static_cast<double>(s.heads) * static_cast<double>(s.kv_heads);
  const double positions = static_cast<double>(s.max_positions);
  switch (u.kind) {
    case UnitKind::kEmbedding:
      return {v * h, positions * h};
    case UnitKind::kNorm:
      return {};
    case UnitKind::kHead:
      if (head == OutputHead::kCausalLm)
        return s.tied_embeddings ? std::vector<double>{} : std::vector{v * h};
      if (s.family == ModelFamily::kBert) return {h * h};  // the MLM transform (tied decoder) or the pooler
      return {};                                           // a two-class score layer
    case UnitKind::kBlock:
      break;
  }
  switch (s.family) {
    case ModelFamily::kGpt2:  // fused c_attn, Conv1D projections
      return {h * (h + 2 * kv), h * h, h * f, f * h};
    case ModelFamily::kBert:
      return {h * h, h * kv, h * kv, h * h, h * f, f * h};
    case ModelFamily::kLlama:
      return {h * h, kv * h, kv * h, h * h, f * h, f * h, f * h};
    case ModelFamily::kMixtral: {  // transformers 5: the experts' weights fused per layer
      const double experts = static_cast<double>(s.experts);
      return {h * h, kv * h, kv * h, h * h, experts * 2 * f * h, experts * h * f};
    }
    case ModelFamily::kResNet50:
      break;
  }
  return {};
}

}  // namespace

double SegmentSlackBytes(double tensor_bytes) {
  const double bytes = std::ceil(tensor_bytes / 512) * 512;
  if (bytes < kMinOwnSegment) return 0;
  const double segment = std::ceil(bytes / kSegmentRounding) * kSegmentRounding;
  return segment - bytes <= kMaxUnsplit ? segment - bytes : 0;
}

double WeightSlackBytes(const ModelSpec& s, const ModelUnit& u, OutputHead head, double bytes_per_param,
                        double tensor_ranks) {
  if (s.family == ModelFamily::kResNet50) return 0;
  double slack = 0;
  for (double elements : UnitTensors(s, u, head)) {
    slack += SegmentSlackBytes(elements / tensor_ranks * bytes_per_param);
  }
  return slack;
}

}  // namespace memcoord::planner
