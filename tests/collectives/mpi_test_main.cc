// main() for GoogleTest binaries run under mpirun: MPI is initialized once around all tests, only rank 0
// prints gtest's progress (every rank still reports failures), and the exit status is any rank's failure.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "collectives/mpi_environment.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto environment = memcoord::MpiEnvironment::Init(&argc, &argv);
  if (!environment.ok()) {
    std::fprintf(stderr, "%s\n", environment.status().ToString().c_str());
    return 2;
  }
  if ((*environment)->world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int local = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&local, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (local != 0) std::fprintf(stderr, "rank %d: tests FAILED\n", (*environment)->world_rank());
  return any;
}
