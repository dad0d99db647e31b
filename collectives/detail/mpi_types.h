// Maps DataType/ReduceOp onto MPI handles. fp16 and bf16 travel as MPI_UINT16_T with user-defined ops that
// reduce in fp32 and round back (MPI has no 16-bit float types). The six user ops are created once per
// process on first use (after MPI_Init) and never freed: MPI_Finalize releases them.
// Thread safety: safe from any thread once MPI is initialized.
#pragma once

#include <mpi.h>

#include <string>

#include "collectives/data_type.h"

namespace memcoord::detail {

MPI_Datatype MpiDatatype(DataType type);
// The MPI op for `op` on `type`; kAvg maps to the sum (the caller divides afterwards).
MPI_Op MpiOp(ReduceOp op, DataType type);
// "MPI_ERR_TRUNCATE: message truncated" for an MPI error code.
std::string MpiErrorString(int code);

}  // namespace memcoord::detail
