#include "coordinator/planner/transformer_activations.h"

#include "coordinator/planner/estimator_coefficients.h"

namespace memcoord::planner {
namespace {

namespace cal = calibration;

double Scale(ModelFamily f, Precision p) {
  const cal::ActivationScales& s = f == ModelFamily::kGpt2      ? cal::kGpt2Scales
                                   : f == ModelFamily::kBert    ? cal::kBertScales
                                   : f == ModelFamily::kMixtral ? cal::kMixtralScales
                                                                : cal::kLlamaScales;
  return p == Precision::kFp32 ? s.fp32 : (p == Precision::kBf16 ? s.bf16 : s.amp);
}

// Unscaled counts. GPT-2 and BERT: the attention keeps its input, q, the attention output and the
// projection input, k and v, two 1-byte dropout masks; the two LayerNorm inputs; GPT-2's tanh GELU keeps
// four feed-forward-sized tensors plus the projection input, BERT's erf GELU two. LLaMA and Mixtral:
// RMSNorm keeps fp32 copies (24 bytes per element in fp32, 16 in 16-bit), attention its input, q, output
// and k, v; SwiGLU gate, up, their product and the activation. Mixtral adds, per expert a token visits,
// the gathered token (its copy for the expert's matmuls) and the expert's output before the routing
// weight, and the router's fp32 softmax. Under autocast the residual stream stays fp32.
BlockActivations Analytic(const ModelSpec& s, Dtypes z) {
  const double h = static_cast<double>(s.hidden);
  const double k = static_cast<double>(s.experts_per_token);
  const double f = static_cast<double>(s.ffn) * k;
  const double kv = KvWidth(s);
  const double amp_residual = z.amp ? 4 * h : 0;
  BlockActivations a;
  switch (s.family) {
    case ModelFamily::kGpt2:
    case ModelFamily::kBert:
      a.attention = (5 * z.d + 2) * h + 2 * z.d * kv;
      a.norms = 2 * z.d * h + amp_residual;
      a.mlp = (s.family == ModelFamily::kGpt2 ? 5 : 2) * f * z.d;
      break;
    case ModelFamily::kLlama:
    case ModelFamily::kMixtral:
      a.attention = 3 * z.d * h + 2 * z.d * kv;
      a.norms = (z.d == 4 ? 24 : 16) * h + amp_residual;
      a.mlp = 4 * z.d * f;
      if (s.family == ModelFamily::kMixtral) {
        a.mlp += 2 * k * z.d * h + 4 * static_cast<double>(s.experts) + 8 * k;
      }
      break;
    case ModelFamily::kResNet50:
      break;
  }
  return a;
}

}  // namespace

Dtypes DtypesFor(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return {4, 4, false};
    case Precision::kBf16:
      return {2, 2, false};
    case Precision::kAmpBf16:
    case Precision::kAmpFp16:
      return {2, 4, true};
  }
  return {};
}

double KvWidth(const ModelSpec& s) {
  return static_cast<double>(s.hidden) / static_cast<double>(s.heads) * static_cast<double>(s.kv_heads);
}

bool MathAttention(const ModelSpec& s, Precision p) { return p == Precision::kFp32 && s.kv_heads < s.heads; }

double AttentionScoresBytes(const ModelSpec& s, Precision p, double batch, double seq, double tensor_ranks) {
  if (!MathAttention(s, p)) return 0;
  return batch * static_cast<double>(s.heads) / tensor_ranks * seq * seq * 4;
}

double ForwardTransientPerToken(const ModelSpec& s, Precision p, double tensor_ranks) {
  const double d = DtypesFor(p).d;
  const double h = static_cast<double>(s.hidden);
  const double f = static_cast<double>(s.ffn) / tensor_ranks;
  const double k = static_cast<double>(s.experts_per_token);
  switch (s.family) {
    case ModelFamily::kGpt2:
    case ModelFamily::kBert:
      return (4 * f + 5 * h) * d;
    case ModelFamily::kLlama:
      return (3 * f + 4 * h) * d;
    case ModelFamily::kMixtral:
      return (k * (4 * f + 2 * h) + 2 * h) * d;
    case ModelFamily::kResNet50:
      break;
  }
  return 0;
}

BlockActivations BlockBytesPerToken(const ModelSpec& s, Precision p, double tensor_ranks) {
  BlockActivations a = Analytic(s, DtypesFor(p));
  const double scale = Scale(s.family, p);
  a.attention *= scale / tensor_ranks;
  a.mlp *= scale / tensor_ranks;
  a.norms *= scale;
  return a;
}

double BlockBackwardTransientPerToken(const ModelSpec& s, Precision p, double tensor_ranks) {
  const double f = static_cast<double>(s.ffn) * static_cast<double>(s.experts_per_token);
  return cal::kBlockBackwardTransient * f * DtypesFor(p).d / tensor_ranks;
}

HeadActivations HeadBytesPerToken(const ModelSpec& s, OutputHead head, Precision p, double tensor_ranks) {
  const Dtypes z = DtypesFor(p);
  const double h = static_cast<double>(s.hidden);
  const double v = static_cast<double>(s.vocab) / tensor_ranks;
  HeadActivations a;
  a.io = (2 * z.d + 1) * h;
  switch (head) {
    case OutputHead::kCausalLm:
      // transformers upcasts the logits to fp32 for the loss; log-softmax keeps its fp32 output. The
      // logits (and their fp32 copy) die with the output object right after the forward.
      a.saved = 4 * v;
      a.forward_transient = (z.d == 2 ? z.d + 4 : z.d) * v;
      a.backward_transient = 8 * v;  // the loss's and log-softmax's fp32 gradients
      break;
    case OutputHead::kMaskedLm: {
      // The transform (dense, GELU, LayerNorm) keeps four hidden-sized tensors; CrossEntropyLoss runs
      // log-softmax over every position (in fp32 under autocast, in the activation dtype otherwise).
      // Under autocast the half-precision logits are kept as well; the forward's transient (the logits
      // before the loss) and backward's two gradients over the vocabulary are in the activation dtype
      // (fit rows: forward fp32 4, bf16 2, amp-bf16 2 bytes per entry; backward 8, 4, 4).
      const double loss_bytes = z.amp ? 4 + z.d : z.d;
      a.saved = 4 * z.d * h + loss_bytes * v;
      a.forward_transient = z.d * v;
      a.backward_transient = 2 * z.d * v;
      break;
    }
    case OutputHead::kSequenceClassification:
    case OutputHead::kImageClassification:
    case OutputHead::kDefault:
      a.backward_transient = BlockBackwardTransientPerToken(s, p, tensor_ranks);
      break;
  }
  return a;
}

}  // namespace memcoord::planner
