// WorkerOptions::trace_dir ($MEMCOORD_TRACE_DIR): every pool the worker makes records a trace that
// ReadTrace (and so `memcoord replay`) reads back, one file per pool; a directory that cannot be used is an
// init() error that names it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "allocator/trace.h"
#include "worker/worker.h"

namespace memcoord {
namespace {

namespace fs = std::filesystem;

class WorkerTraceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("memcoord-worker-trace-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  WorkerOptions Options() const {
    WorkerOptions options;
    options.backend = "host";
    options.capacity_bytes = 64 << 20;
    options.simulated_devices = 2;
    options.topology = Topology{3, 0, 4, "test"};
    options.trace_dir = (dir_ / "nested").string();  // made on init
    return options;
  }

  fs::path dir_;
};

TEST_F(WorkerTraceTest, EveryPoolRecordsATraceThatReplayReads) {
  {
    auto worker = Worker::init(Options());
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    auto d0 = (*worker)->device_pool(0);
    auto d1 = (*worker)->device_pool(1);
    ASSERT_TRUE(d0.ok() && d1.ok());
    for (int i = 0; i < 10; ++i) {
      auto a = (*d0)->allocate(1000 + i, kDefaultStream);
      auto b = (*d1)->allocate(3 << 20, kDefaultStream);
      ASSERT_TRUE(a.ok() && b.ok());
      ASSERT_TRUE((*d0)->deallocate(*a).ok());
      if (i % 2 == 0) {
        ASSERT_TRUE((*d1)->deallocate(*b).ok());  // five stay live
      }
    }
  }  // the worker's destruction closes the files
  auto primary = ReadTrace((dir_ / "nested" / "rank3.default.trace.gz").string());
  ASSERT_TRUE(primary.ok()) << primary.status().ToString();
  EXPECT_EQ(primary->allocations, 10u);
  EXPECT_EQ(primary->frees, 10u);
  EXPECT_EQ(primary->peak_live_bytes, 1009u);     // sizes as requested
  EXPECT_EQ(primary->workload, "rank3.default");  // the header names the trace as its file does
  auto second = ReadTrace((dir_ / "nested" / "rank3.default@1.trace.gz").string());
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->allocations, 10u);
  EXPECT_EQ(second->frees, 5u);
  EXPECT_EQ(second->peak_live_bytes, 5u * (3 << 20));  // four kept, plus the one in hand
  EXPECT_EQ(second->workload, "rank3.default@1");
}

TEST_F(WorkerTraceTest, AnUnusableDirectoryIsAnInitErrorNamingIt) {
  fs::create_directories(dir_);
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "x";
  WorkerOptions options = Options();
  options.trace_dir = file.string();
  auto worker = Worker::init(options);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(worker.status().message().find("MEMCOORD_TRACE_DIR '" + file.string() + "'"), std::string::npos)
      << worker.status().message();
}

}  // namespace
}  // namespace memcoord
