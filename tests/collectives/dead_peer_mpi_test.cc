// One rank exits in the middle of a run of allreduces; every other rank must get DEADLINE_EXCEEDED naming
// the operation and the peer count within the communicator's timeout, then ABORTED, and leave.
// Run under `mpirun --enable-recovery` (plain mpirun kills the survivors as soon as a rank exits); its exit
// status is then always 0, so run_dead_peer.sh counts the survivors' "[  PASSED  ]" lines instead.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "collectives/mpi_communicator.h"
#include "collectives/mpi_environment.h"

namespace memcoord {
namespace {

constexpr auto kTimeout = std::chrono::milliseconds(2000);

TEST(DeadPeer, SurvivorsGetTheNamedErrorWithinTheTimeout) {
  auto comm = MpiCommunicator::Create(MPI_COMM_WORLD, {kTimeout, false});
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  const int n = (*comm)->size();
  const int leaver = n - 1;
  std::vector<float> gradient(1024, 1.0f);
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(
        (*comm)
            ->allreduce(gradient.data(), gradient.data(), gradient.size(), DataType::kFloat32, ReduceOp::kAvg)
            .ok());
  }
  if ((*comm)->rank() == leaver) {
    std::fprintf(stderr, "rank %d: exiting mid-run\n", leaver);
    MpiEnvironment::ExitWithoutFinalize(0);
  }
  const auto start = std::chrono::steady_clock::now();
  Status s = (*comm)->allreduce(gradient.data(), gradient.data(), gradient.size(), DataType::kFloat32,
                                ReduceOp::kAvg);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  std::fprintf(
      stderr, "rank %d: %s after %lld ms\n", (*comm)->rank(), s.ToString().c_str(),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count()));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("allreduce(avg, 1024 x fp32) on a mpi communicator of " + std::to_string(n) +
                             " ranks"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find(std::to_string(n - 1) + " peers"), std::string::npos) << s.message();
  EXPECT_GE(elapsed, kTimeout);
  EXPECT_LT(elapsed, kTimeout + std::chrono::milliseconds(1000));
  Status after = (*comm)->barrier();
  EXPECT_EQ(after.code(), StatusCode::kAborted) << after.ToString();
  EXPECT_NE(after.message().find("an earlier allreduce(avg, 1024 x fp32) timed out"), std::string::npos)
      << after.message();
}

}  // namespace
}  // namespace memcoord

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  auto environment = memcoord::MpiEnvironment::Init(&argc, &argv);
  if (!environment.ok()) return 2;
  const int rc = RUN_ALL_TESTS();
  // A peer is gone: MPI_Finalize could wait for it, so survivors leave without it.
  memcoord::MpiEnvironment::ExitWithoutFinalize(rc);
}
