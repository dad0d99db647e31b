// The ranges the planner accepts, chosen so that its arithmetic cannot leave its types: parameter counts
// are int64, bytes are uint64 (an estimate is computed in double and converted once), and a plan sums
// bytes over models and devices. Each limit is far above any real model or device; input past one is
// INVALID_ARGUMENT naming the field and the limit, checked where the input enters (the parsers, and
// MakePlan for requests built in memory, as the Plan RPC does from workers' reports).
//   params per model        <= 2^48  (280 trillion): int64 sums over 100,000 layers cannot overflow, and
//                                    weights + gradients + optimizer state stay below 2^53 bytes
//   estimated peak per model <= 2^53 bytes (8 PiB); so does the sum of its units and its per-device overhead
//   capacity per device     <= 2^60 bytes (1 EiB)
//   models per plan         <= 1024: the bytes of every model together stay below 2^63
//   devices per plan        <= 65,536 (2^16): a cluster of tens of thousands of GPUs
//   devices × models        <= 2^22 (4,194,304; e.g. 65,536 devices with 64 models, or 4,096 with 1,024):
//                                    placement costs about devices × models steps (times a log factor)
//   layers per plan         <= 16,384 over all models (1,024 gpt2, or 128 llama2-70b): each estimate
//                                    costs about 0.2-0.3 µs per layer, and the advice of an infeasible
//                                    plan re-estimates up to ~150 times
//   devices with a pipelined model <= 256: a 1F1B pipeline puts one stage on each device, and its split
//                                    costs stages × log(layers) × log(bytes) per estimate
// so that a plan at the limits, advice included, answers in well under a second (placement_planner.h).
// Sums over devices (up to 2^16 of them, 2^60 each) can still pass 2^64: they saturate (AddSaturated),
// which keeps every comparison against them right. Constants and a pure function; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

namespace memcoord::planner {

inline constexpr std::int64_t kMaxParams = std::int64_t{1} << 48;
inline constexpr std::uint64_t kMaxModelBytes = std::uint64_t{1} << 53;
inline constexpr std::uint64_t kMaxDeviceBytes = std::uint64_t{1} << 60;
inline constexpr std::size_t kMaxModels = 1024;
inline constexpr std::size_t kMaxDevices = std::size_t{1} << 16;
inline constexpr std::size_t kMaxDeviceModelPairs = std::size_t{1} << 22;
inline constexpr std::int64_t kMaxPlanLayers = 16384;
inline constexpr std::size_t kMaxPipelineStages = 256;

// a + b, or UINT64_MAX when the sum does not fit.
constexpr std::uint64_t AddSaturated(std::uint64_t a, std::uint64_t b) {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max()
                                                           : a + b;
}

}  // namespace memcoord::planner
