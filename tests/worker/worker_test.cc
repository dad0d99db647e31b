#include "worker/worker.h"

#include <gtest/gtest.h>

#include <chrono>

namespace memcoord {
namespace {

using std::chrono::milliseconds;

TEST(Worker, TrainingNeverBlocksWithoutACoordinator) {
  WorkerOptions options;
  options.coordinator = "127.0.0.1:1";  // nothing listens there: the session keeps retrying
  options.backend = "host";
  options.capacity_bytes = 256 << 20;
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  PoolOptions po;
  po.name = "default";
  auto pool = (*worker)->create_pool(po);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*worker)->create_pool(po).status().code(), StatusCode::kAlreadyExists);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 200; ++step) {
    (*worker)->step_begin();
    auto block = (*pool)->allocate(1 << 20);
    ASSERT_TRUE(block.ok());
    ASSERT_TRUE((*pool)->deallocate(*block).ok());
    ASSERT_TRUE((*worker)->step_end().ok());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_EQ((*worker)->step(), 200);
  EXPECT_FALSE((*worker)->attached());
  EXPECT_EQ((*worker)->device(), -1);
  const auto stop = std::chrono::steady_clock::now();
  (*worker)->shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, milliseconds(1000));
}

TEST(Worker, BadOptionsAreRefused) {
  WorkerOptions options;
  options.backend = "quantum";
  options.topology = Topology{};
  EXPECT_EQ(Worker::init(options).status().code(), StatusCode::kInvalidArgument);
  options.backend = "host";
  options.report_interval = milliseconds(0);
  EXPECT_EQ(Worker::init(options).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memcoord
