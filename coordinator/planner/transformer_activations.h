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

}  // namespace memcoord::planner
