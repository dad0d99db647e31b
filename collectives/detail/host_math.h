// Element-wise host arithmetic on typed buffers: the division that turns a sum into an average (MPI has no
// average op) and the reductions MPI's user-defined fp16/bf16 ops perform (in fp32, rounded back).
// Pure functions over caller-owned memory: thread-safe for disjoint buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/data_type.h"

namespace memcoord::detail {

// data[i] /= divisor for `count` elements of `type` (integers truncate toward zero; fp16/bf16 through fp32).
// REQUIRES: divisor > 0, IsValid(type).
void DivideInPlace(void* data, std::size_t count, DataType type, int divisor);

// inout[i] = round(op(float(in[i]), float(inout[i]))) for the 16-bit float `type` (kFloat16 or kBFloat16).
// REQUIRES: op is kSum, kMax or kMin.
void Reduce16(const std::uint16_t* in, std::uint16_t* inout, std::size_t count, DataType type, ReduceOp op);

}  // namespace memcoord::detail
