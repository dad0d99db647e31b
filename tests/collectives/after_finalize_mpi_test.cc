// A communicator that outlives its MpiEnvironment: its collectives return FAILED_PRECONDITION instead of
// calling MPI after MPI_Finalize, which Open MPI answers by aborting the whole job. Its own process (MPI is
// finalized once for good), as a singleton or under mpirun -np 1.
#include <mpi.h>

#include <cstdio>
#include <string>

#include "collectives/mpi_communicator.h"
#include "collectives/mpi_environment.h"

int main(int argc, char** argv) {
  using namespace memcoord;
  auto env = MpiEnvironment::Init(&argc, &argv);
  if (!env.ok()) {
    std::printf("FAILED: MPI init: %s\n", env.status().ToString().c_str());
    return 1;
  }
  auto comm = MpiCommunicator::Create(MPI_COMM_WORLD);
  if (!comm.ok()) {
    std::printf("FAILED: communicator: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  float value = 1.0f;
  if (!(*comm)->allreduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum).ok()) {
    std::printf("FAILED: the allreduce before MPI_Finalize\n");
    return 1;
  }
  env->reset();  // MPI_Finalize, with the communicator still alive
  int failures = 0;
  const auto expect_refused = [&](const char* what, const Status& s) {
    const bool named = s.code() == StatusCode::kFailedPrecondition &&
                       s.message().find("MPI was finalized") != std::string::npos;
    std::printf("%s %s after MPI_Finalize: %s\n", named ? "ok" : "FAILED", what, s.ToString().c_str());
    failures += named ? 0 : 1;
  };
  expect_refused("allreduce", (*comm)->allreduce(&value, &value, 1, DataType::kFloat32, ReduceOp::kSum));
  expect_refused("broadcast", (*comm)->broadcast(&value, 1, DataType::kFloat32, 0));
  expect_refused("barrier", (*comm)->barrier());
  comm->reset();  // the destructor, too, must not call MPI
  std::printf("%s\n", failures == 0 ? "PASSED" : "FAILED");
  return failures == 0 ? 0 : 1;
}
