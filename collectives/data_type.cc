#include "collectives/data_type.h"

namespace memcoord {

std::size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kFloat64:
      return 8;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
  }
  return 0;
}

std::string_view DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "fp32";
    case DataType::kFloat16:
      return "fp16";
    case DataType::kBFloat16:
      return "bf16";
    case DataType::kFloat64:
      return "fp64";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
  }
  return "invalid";
}

std::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "invalid";
}

bool IsValid(DataType type) { return SizeOf(type) != 0; }
bool IsValid(ReduceOp op) { return ReduceOpName(op) != "invalid"; }

}  // namespace memcoord
