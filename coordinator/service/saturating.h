// Saturating arithmetic for numbers the coordinator gets from workers and clients (byte counts, steps):
// a 64-bit value near its maximum must never wrap into a small one (a wrapped `allocated * 10` made a pool
// at 1.8e19 bytes look empty; a wrapped sum of budgets looked affordable). Results clamp at the type's
// bounds instead. Header-only, constexpr, no state.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace memcoord::coordinator {

constexpr std::uint64_t SatAdd(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

constexpr std::uint64_t SatMul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

// a - b, or 0 when b > a.
constexpr std::uint64_t SatSub(std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; }

constexpr std::int64_t SatAdd(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? std::numeric_limits<std::int64_t>::max() : std::numeric_limits<std::int64_t>::min();
}

// A double to int64 without undefined behaviour: NaN is 0, out-of-range values clamp.
inline std::int64_t ClampToInt64(double v) {
  if (std::isnan(v)) return 0;
  // 2^63 is exactly representable; anything at or above it does not fit.
  if (v >= 9223372036854775808.0) return std::numeric_limits<std::int64_t>::max();
  if (v <= -9223372036854775808.0) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(v);
}

}  // namespace memcoord::coordinator
