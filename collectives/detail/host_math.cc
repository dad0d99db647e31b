#include "collectives/detail/host_math.h"

#include <algorithm>

#include "collectives/detail/half.h"

namespace memcoord::detail {
namespace {

template <typename T>
void Divide(T* data, std::size_t count, int divisor) {
  const T d = static_cast<T>(divisor);
  for (std::size_t i = 0; i < count; ++i) data[i] /= d;
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void Divide16(std::uint16_t* data, std::size_t count, int divisor) {
  const float d = static_cast<float>(divisor);
  for (std::size_t i = 0; i < count; ++i) data[i] = FromFloat(ToFloat(data[i]) / d);
}

template <float (*ToFloat)(std::uint16_t), std::uint16_t (*FromFloat)(float)>
void Reduce16As(const std::uint16_t* in, std::uint16_t* inout, std::size_t count, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      for (std::size_t i = 0; i < count; ++i) inout[i] = FromFloat(ToFloat(in[i]) + ToFloat(inout[i]));
      return;
    case ReduceOp::kMax:
      for (std::size_t i = 0; i < count; ++i)
        inout[i] = FromFloat(std::max(ToFloat(in[i]), ToFloat(inout[i])));
      return;
    case ReduceOp::kMin:
      for (std::size_t i = 0; i < count; ++i)
        inout[i] = FromFloat(std::min(ToFloat(in[i]), ToFloat(inout[i])));
      return;
  }
}

}  // namespace

void DivideInPlace(void* data, std::size_t count, DataType type, int divisor) {
  switch (type) {
    case DataType::kFloat32:
      return Divide(static_cast<float*>(data), count, divisor);
    case DataType::kFloat64:
      return Divide(static_cast<double*>(data), count, divisor);
    case DataType::kInt32:
      return Divide(static_cast<std::int32_t*>(data), count, divisor);
    case DataType::kInt64:
      return Divide(static_cast<std::int64_t*>(data), count, divisor);
    case DataType::kFloat16:
      return Divide16<HalfToFloat, FloatToHalf>(static_cast<std::uint16_t*>(data), count, divisor);
    case DataType::kBFloat16:
      return Divide16<BFloat16ToFloat, FloatToBFloat16>(static_cast<std::uint16_t*>(data), count, divisor);
  }
}

void Reduce16(const std::uint16_t* in, std::uint16_t* inout, std::size_t count, DataType type, ReduceOp op) {
  if (type == DataType::kFloat16) {
    Reduce16As<HalfToFloat, FloatToHalf>(in, inout, count, op);
  } else {
    Reduce16As<BFloat16ToFloat, FloatToBFloat16>(in, inout, count, op);
  }
}

}  // namespace memcoord::detail
