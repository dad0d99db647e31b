#include "collectives/data_type.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "collectives/detail/half.h"
#include "collectives/detail/host_math.h"

namespace memcoord {
namespace {

using detail::BFloat16ToFloat;
using detail::FloatToBFloat16;
using detail::FloatToHalf;
using detail::HalfToFloat;

TEST(DataType, SizesAndNames) {
  EXPECT_EQ(SizeOf(DataType::kFloat16), 2u);
  EXPECT_EQ(SizeOf(DataType::kInt64), 8u);
  EXPECT_EQ(DataTypeName(DataType::kBFloat16), "bf16");
  EXPECT_EQ(ReduceOpName(ReduceOp::kAvg), "avg");
  EXPECT_FALSE(IsValid(static_cast<DataType>(17)));
  EXPECT_FALSE(IsValid(static_cast<ReduceOp>(-1)));
}

TEST(Half, KnownValues) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(FloatToHalf(5.960464477539063e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalf(2.9e-8f), 0x0000);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048.0f), 0x3c00);  // halfway: ties to even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048.0f), 0x3c02);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(HalfToFloat(0x0001), 5.960464477539063e-8f);
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(BFloat16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256.0f), 0x3f80);  // tie to even
}

TEST(Half, EveryHalfRoundTrips) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    const float f = HalfToFloat(h);
    if (std::isnan(f)) continue;
    EXPECT_EQ(FloatToHalf(f), h) << std::hex << bits;
    const auto b = static_cast<std::uint16_t>(bits);
    if (!std::isnan(BFloat16ToFloat(b))) {
      EXPECT_EQ(FloatToBFloat16(BFloat16ToFloat(b)), b) << std::hex << bits;
    }
  }
}

TEST(HostMath, DivideAndReduce16) {
  std::int32_t ints[3] = {7, -7, 9};
  detail::DivideInPlace(ints, 3, DataType::kInt32, 2);
  EXPECT_EQ(ints[0], 3);
  EXPECT_EQ(ints[1], -3);
  EXPECT_EQ(ints[2], 4);
  std::uint16_t in[2] = {FloatToHalf(1.5f), FloatToHalf(-4.0f)};
  std::uint16_t inout[2] = {FloatToHalf(2.0f), FloatToHalf(3.0f)};
  detail::Reduce16(in, inout, 2, DataType::kFloat16, ReduceOp::kSum);
  EXPECT_EQ(HalfToFloat(inout[0]), 3.5f);
  EXPECT_EQ(HalfToFloat(inout[1]), -1.0f);
  detail::Reduce16(in, inout, 2, DataType::kFloat16, ReduceOp::kMax);
  EXPECT_EQ(HalfToFloat(inout[0]), 3.5f);
  EXPECT_EQ(HalfToFloat(inout[1]), -1.0f);
  detail::Reduce16(in, inout, 2, DataType::kFloat16, ReduceOp::kMin);
  EXPECT_EQ(HalfToFloat(inout[0]), 1.5f);
  EXPECT_EQ(HalfToFloat(inout[1]), -4.0f);
}

}  // namespace
}  // namespace memcoord
