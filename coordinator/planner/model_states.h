// ModelStates: the bytes of weights, gradients and optimizer state one rank holds, by precision, optimizer
// and sharding — the "model states" of the ZeRO paper (Rajbhandari et al., 2020), for Ψ parameters on that
// rank (after any tensor or pipeline split) and N data-parallel ranks.
//
// Layouts:
//   - none / DDP / FSDP follow PyTorch's: weights and gradients in the weight dtype (4 bytes for fp32 and
//     amp-*, 2 for bf16), optimizer state in it too (AdamW: 2 states, SGD-momentum: 1), AdamW's foreach
//     step adds one parameter-sized temporary. DDP (N > 1, no sharding) also keeps its gradient buckets: with
//     the default gradient_as_bucket_view=False they are a second copy of every gradient, allocated when
//     the model is wrapped and kept for the whole run.
//   - zero1/2/3 follow DeepSpeed's: 16-bit weights and gradients (2Ψ + 2Ψ) and K bytes of fp32 master
//     weights and optimizer state per parameter (K = 12 for AdamW, 8 for SGD-momentum, 4 for SGD) under
//     bf16 and amp-*; under fp32, 4Ψ + 4Ψ and K = 8/4/0. Stage 1 shards the K part: 2Ψ + 2Ψ + KΨ/N;
//     stage 2 also the gradients: 2Ψ + (2+K)Ψ/N; stage 3 everything: (2+2+K)Ψ/N. The fused step has no
//     parameter-sized temporary.
//   - fsdp (FULL_SHARD) shards PyTorch's layout over N, and adds the unsharded parameters of the unit being
//     computed plus the one prefetched (2 × the largest unit, in the compute dtype) and one unit's
//     unsharded gradients before their reduce-scatter.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "coordinator/planner/parallelism.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

struct ModelStates {
  double weights = 0;
  double gradients = 0;
  double optimizer_state = 0;
  double optimizer_temporaries = 0;  // only during the optimizer step
  double ddp_buckets = 0;            // DDP's gradient buckets, resident in every phase
  double gathered = 0;               // zero3/fsdp: unsharded parameters (and a unit's gradients) in flight
};

// `params` parameters on this rank; `largest_unit_params` the largest block (for what zero3/fsdp gather).
ModelStates ModelStatesPerRank(double params, double largest_unit_params, Precision precision,
                               Optimizer optimizer, const Parallelism& parallel, bool training);

// DeepSpeed's K: bytes of master weights and optimizer state per parameter under ZeRO (see above).
double ZeroOptimizerBytesPerParam(Precision precision, Optimizer optimizer);

}  // namespace memcoord::planner
