// What PyTorch's CUDA caching allocator adds to large weight tensors, as torch.cuda.memory_allocated counts
// it. A request of 10 MiB or more gets a segment of its own, rounded up to 2 MiB, and the block is split
// only if more than 1 MiB would remain; otherwise the whole segment counts as allocated. Parameters are
// allocated into fresh segments while the model is built, so every weight matrix of at least 10 MiB
// carries that slack for the whole run: a 43 MiB matrix counts 44 MiB, a 44.9 MiB one 46 MiB with the
// 1.1 MiB split off. Smaller tensors share 20 MiB segments and what they leave depends on the allocation
// history (e.g. a 16-bit conversion of a built model): not modelled.
// Measured on the H200 (weights_bytes of the calibration rows): the rule gives the fp32 weights' excess
// over 4 bytes per parameter exactly (gpt2-large 72.6 MiB, llama-mid 50 MiB, llama-small 24 MiB,
// llama-gqa 18 MiB, gpt2 0.76 MiB) and llama's 16-bit excess within 2 MiB.
// Pure functions; thread-safe.
#pragma once

#include "coordinator/planner/model_spec.h"
#include "coordinator/planner/model_units.h"
#include "coordinator/planner/training_options.h"

namespace memcoord::planner {

// Bytes the allocator counts beyond `tensor_bytes` for one tensor allocated into a fresh segment.
double SegmentSlackBytes(double tensor_bytes);

// The slack of unit `u`'s weight tensors on one rank: `bytes_per_param` per element, the block matmuls and
// the vocabulary-wide embedding and head split over `tensor_ranks`. 0 for resnet50 (no weight reaches 10
// MiB).
double WeightSlackBytes(const ModelSpec& s, const ModelUnit& u, OutputHead head, double bytes_per_param,
                        double tensor_ranks);

}  // namespace memcoord::planner
