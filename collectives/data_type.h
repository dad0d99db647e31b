// DataType and ReduceOp: the element types and reductions every Communicator accepts, independent of the
// backend (MPI, NCCL). fp16 and bf16 are stored as raw 16-bit patterns; host code converts them through
// collectives/detail/half.h. Plain values: thread-safe.
#pragma once

#include <cstddef>
#include <string_view>

namespace memcoord {

enum class DataType : int {
  kFloat32 = 0,
  kFloat16 = 1,
  kBFloat16 = 2,
  kFloat64 = 3,
  kInt32 = 4,
  kInt64 = 5,
};
constexpr int kNumDataTypes = 6;

enum class ReduceOp : int {
  kSum = 0,
  kAvg = 1,  // sum divided by the communicator's size (integers: truncated toward zero)
  kMax = 2,
  kMin = 3,
};
constexpr int kNumReduceOps = 4;

// Bytes per element; 0 for a value outside the enum.
std::size_t SizeOf(DataType type);
// "fp32", "fp16", "bf16", "fp64", "int32", "int64"; "invalid" outside the enum.
std::string_view DataTypeName(DataType type);
// "sum", "avg", "max", "min"; "invalid" outside the enum.
std::string_view ReduceOpName(ReduceOp op);

bool IsValid(DataType type);
bool IsValid(ReduceOp op);

}  // namespace memcoord
