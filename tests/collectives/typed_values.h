// Test helpers: typed buffers filled with small integers (exact in every DataType, so any reduction order
// gives bit-identical sums) and the serial reference each collective must reproduce.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "collectives/data_type.h"
#include "collectives/detail/half.h"

namespace memcoord::testing {

using Bytes = std::vector<unsigned char>;

inline void Store(DataType type, double value, void* base, std::size_t i) {
  switch (type) {
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(value);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = value;
      return;
    case DataType::kInt32:
      static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(value);
      return;
    case DataType::kInt64:
      static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(value);
      return;
    case DataType::kFloat16:
      static_cast<std::uint16_t*>(base)[i] = detail::FloatToHalf(static_cast<float>(value));
      return;
    case DataType::kBFloat16:
      static_cast<std::uint16_t*>(base)[i] = detail::FloatToBFloat16(static_cast<float>(value));
      return;
  }
}

// Element i of rank r's input, an integer in [-6, 6] that varies with rank, index and seed.
inline double Input(int rank, std::size_t i, int seed) {
  return static_cast<double>(
      static_cast<long long>((rank * 7 + i * 3 + static_cast<std::size_t>(seed) * 5) % 13) - 6);
}

inline Bytes RankData(DataType type, int rank, std::size_t count, int seed) {
  Bytes out(std::max<std::size_t>(1, count * SizeOf(type)));
  for (std::size_t i = 0; i < count; ++i) Store(type, Input(rank, i, seed), out.data(), i);
  return out;
}

// Average the way every backend defines it: the exact sum in the type, divided in the type's arithmetic
// (fp16/bf16: in fp32, then rounded; integers: truncated).
inline void StoreAverage(DataType type, double sum, int n, void* base, std::size_t i) {
  switch (type) {
    case DataType::kFloat32:
      static_cast<float*>(base)[i] = static_cast<float>(sum) / static_cast<float>(n);
      return;
    case DataType::kFloat64:
      static_cast<double*>(base)[i] = sum / n;
      return;
    case DataType::kInt32:
      static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(sum) / n;
      return;
    case DataType::kInt64:
      static_cast<std::int64_t*>(base)[i] = static_cast<std::int64_t>(sum) / n;
      return;
    case DataType::kFloat16:
      static_cast<std::uint16_t*>(base)[i] =
          detail::FloatToHalf(static_cast<float>(sum) / static_cast<float>(n));
      return;
    case DataType::kBFloat16:
      static_cast<std::uint16_t*>(base)[i] =
          detail::FloatToBFloat16(static_cast<float>(sum) / static_cast<float>(n));
      return;
  }
}

// The reduction of element i over ranks [0, n).
inline void StoreReduced(DataType type, ReduceOp op, int n, std::size_t i, int seed, void* base,
                         std::size_t at) {
  double sum = 0;
  double max = Input(0, i, seed);
  double min = max;
  for (int r = 0; r < n; ++r) {
    const double v = Input(r, i, seed);
    sum += v;
    max = std::max(max, v);
    min = std::min(min, v);
  }
  switch (op) {
    case ReduceOp::kSum:
      return Store(type, sum, base, at);
    case ReduceOp::kAvg:
      return StoreAverage(type, sum, n, base, at);
    case ReduceOp::kMax:
      return Store(type, max, base, at);
    case ReduceOp::kMin:
      return Store(type, min, base, at);
  }
}

inline Bytes ReducedReference(DataType type, ReduceOp op, int n, std::size_t count, int seed) {
  Bytes out(std::max<std::size_t>(1, count * SizeOf(type)));
  for (std::size_t i = 0; i < count; ++i) StoreReduced(type, op, n, i, seed, out.data(), i);
  return out;
}

// An empty vector's data() may be null, and memcmp with a null pointer is undefined even for 0 bytes.
inline bool SameBytes(const Bytes& a, const Bytes& b, std::size_t bytes) {
  return bytes == 0 || std::memcmp(a.data(), b.data(), bytes) == 0;
}

constexpr DataType kAllTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                                  DataType::kFloat64, DataType::kInt32,   DataType::kInt64};
constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin};

}  // namespace memcoord::testing
