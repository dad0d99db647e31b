// What a transformer's forward saves for backward, per token, by kind — the activation side of the
// estimate. Counts are analytic (the tensors autograd keeps: layer inputs, q/k/v, attention output,
// dropout masks, norm inputs and outputs, feed-forward intermediates; PyTorch's memory-efficient SDPA keeps
// no s×s matrix) and each block's count is multiplied by a scale fitted on H200 measurements
// (estimator_coefficients.h, fit rows only). Tensor parallelism over T ranks divides the attention and MLP
// tensors and the vocabulary-wide logits by T (Megatron-style, no sequence parallelism: norms and the
// residual stream stay whole on every rank). Pure functions; thread-safe.
#pragma once

#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

// Element sizes of a precision: activations (d), weights/gradients/state (wb), autocast.
struct Dtypes {
  double d = 4;
  double wb = 4;
  bool amp = false;
};
Dtypes DtypesFor(Precision p);

// Bytes one block saves per token, after calibration, split by kind.
struct BlockActivations {
  double attention = 0;  // q, k, v, attention output and projections, their dropout masks
  double mlp = 0;        // feed-forward (mixtral: the experts each token visits, dispatch copies, router)
  double norms = 0;      // norm inputs/outputs and the residual stream kept for them
  double total() const { return attention + mlp + norms; }
};
BlockActivations BlockBytesPerToken(const ModelSpec& s, Precision p, double tensor_ranks);

// The head's share per token (training), after the last block: what stays saved until backward, the peak
// above that while the loss is computed (logits, their fp32 upcast), and the peak during the head's
// backward (loss and log-softmax gradients). `io` is the embedding output, dropout mask and final norm.
struct HeadActivations {
  double io = 0;
  double saved = 0;  // logits and loss (vocabulary heads: the fp32 log-softmax), MLM transform
  double forward_transient = 0;
  double backward_transient = 0;
};
HeadActivations HeadBytesPerToken(const ModelSpec& s, OutputHead head, Precision p, double tensor_ranks);

// Bytes of a block's backward beyond what it saved (gradients of its largest intermediates), per token.
double BlockBackwardTransientPerToken(const ModelSpec& s, Precision p, double tensor_ranks);

// Key/value width: hidden / heads × kv_heads.
double KvWidth(const ModelSpec& s);

// PyTorch's SDPA has no fused kernel for grouped-query attention (kv_heads < heads) on fp32 inputs: flash
// and cuDNN attention take 16-bit inputs only and memory-efficient attention has no GQA, so the math
// fallback runs and materializes the batch × heads × seq × seq fp32 scores of every attention call
// (transformers passes enable_gqa when the attention mask is all ones). Under autocast the inputs are 16-bit
// and flash attention runs.
bool MathAttention(const ModelSpec& s, Precision p);

// Bytes of one attention call's scores (batch × heads × seq × seq × 4) when MathAttention, else 0.
double AttentionScoresBytes(const ModelSpec& s, Precision p, double batch, double seq, double tensor_ranks);

// A no-grad forward's largest set of live tensors inside one block, per token, beyond the KV cache (the
// prompt's forward in model.generate, one inference forward). Counted from the code transformers runs:
//   gpt2:       the tanh GELU's temporaries (4 feed-forward-sized tensors) and 5 hidden-sized ones (the
//               embedding output the model keeps, the layer input, residual, norm output, attention output);
//               bert (no generate, not measured) is given the same count;
//   llama:      SwiGLU's act(gate), up and their product (3 ffn) and 4 hidden-sized tensors (the embedding
//               output, the layer input, the residual, the normed MLP input);
//   mixtral:    per expert a token visits (grouped_mm): the gathered token and its expert-sorted copy
//               (2 hidden), gate_up (2 ffn), act(gate) and the product (2 ffn); and 2 hidden-sized tensors.
// Measured on the H200 (fit2_h200.jsonl, prefill_peak_bytes): 4f + 5h, 3f + 4h and k(4f + 2h) + 2h agree
// with the prompt's forward within 3% of the transient for gpt2, gpt2-medium, llama-small, mixtral-small
// and mixtral-8e.
double ForwardTransientPerToken(const ModelSpec& s, Precision p, double tensor_ranks);

}  // namespace memcoord::planner
