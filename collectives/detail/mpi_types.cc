#include "collectives/detail/mpi_types.h"

#include <cstdint>
#include <mutex>

#include "collectives/detail/host_math.h"

namespace memcoord::detail {
namespace {

template <DataType kType, ReduceOp kOp>
void Reduce16Op(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  Reduce16(static_cast<const std::uint16_t*>(in), static_cast<std::uint16_t*>(inout),
           static_cast<std::size_t>(*len), kType, kOp);
}

struct HalfOps {
  MPI_Op ops[2][3];  // [fp16, bf16][sum, max, min]
};

const HalfOps& GetHalfOps() {
  static HalfOps half_ops;
  static std::once_flag once;
  std::call_once(once, [] {
    MPI_Op_create(&Reduce16Op<DataType::kFloat16, ReduceOp::kSum>, 1, &half_ops.ops[0][0]);
    MPI_Op_create(&Reduce16Op<DataType::kFloat16, ReduceOp::kMax>, 1, &half_ops.ops[0][1]);
    MPI_Op_create(&Reduce16Op<DataType::kFloat16, ReduceOp::kMin>, 1, &half_ops.ops[0][2]);
    MPI_Op_create(&Reduce16Op<DataType::kBFloat16, ReduceOp::kSum>, 1, &half_ops.ops[1][0]);
    MPI_Op_create(&Reduce16Op<DataType::kBFloat16, ReduceOp::kMax>, 1, &half_ops.ops[1][1]);
    MPI_Op_create(&Reduce16Op<DataType::kBFloat16, ReduceOp::kMin>, 1, &half_ops.ops[1][2]);
  });
  return half_ops;
}

int OpIndex(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return 0;
    case ReduceOp::kMax:
      return 1;
    case ReduceOp::kMin:
      return 2;
  }
  return 0;
}

}  // namespace

MPI_Datatype MpiDatatype(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kFloat16:
    case DataType::kBFloat16:
      return MPI_UINT16_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op MpiOp(ReduceOp op, DataType type) {
  if (type == DataType::kFloat16 || type == DataType::kBFloat16) {
    return GetHalfOps().ops[type == DataType::kFloat16 ? 0 : 1][OpIndex(op)];
  }
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return MPI_SUM;
    case ReduceOp::kMax:
      return MPI_MAX;
    case ReduceOp::kMin:
      return MPI_MIN;
  }
  return MPI_OP_NULL;
}

std::string MpiErrorString(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(length)) + " (MPI error " + std::to_string(code) + ")";
}

}  // namespace memcoord::detail
