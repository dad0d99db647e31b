// RecorderAdaptor alone over a FakeResource: successful allocations and frees reach the trace, in order,
// with the bytes asked and the allocation's stream; failed calls do not.
#include "allocator/recorder_adaptor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "allocator/trace.h"
#include "allocator/trace_recorder.h"
#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

TEST(RecorderAdaptor, WritesSuccessfulCallsOnly) {
  const std::string path = ::testing::TempDir() + "/recorder_adaptor_" + std::to_string(getpid()) + ".trace";
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.open(path, "adaptor-test").ok());
  testing::FakeResource fake;
  RecorderAdaptor rec(fake, recorder);
  Allocation a = *rec.allocate(1000, 0x51);
  Allocation b = *rec.allocate(3 * kMiB);
  fake.fail_next_allocations = 1;
  EXPECT_FALSE(rec.allocate(4096).ok());
  int local = 0;
  EXPECT_FALSE(rec.deallocate(&local).ok());
  ASSERT_TRUE(rec.deallocate(a.ptr).ok());
  ASSERT_TRUE(rec.deallocate(b.ptr).ok());
  ASSERT_TRUE(recorder.close().ok());

  Result<Trace> trace = ReadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->allocations, 2u);
  EXPECT_EQ(trace->frees, 2u);
  ASSERT_EQ(trace->events.size(), 4u);
  EXPECT_EQ(trace->events[0].bytes, 1000u);
  EXPECT_EQ(trace->events[0].stream, 0x51u);
  EXPECT_EQ(trace->events[1].bytes, 3 * kMiB);
  EXPECT_EQ(trace->events[2].kind, TraceEvent::Kind::kFree);
  EXPECT_EQ(trace->events[2].slot, trace->events[0].slot);
  EXPECT_EQ(trace->peak_live_bytes, 1000 + 3 * kMiB);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memcoord
