// Trace recording must not put file I/O on the allocation path: a stalled trace file (here a FIFO nobody
// reads) must not block allocations, and everything recorded still reaches the file, in order, once the
// reader catches up.
#include "allocator/trace_recorder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <future>
#include <string>
#include <thread>

#include "allocator/caching_pool.h"
#include "allocator/trace.h"
#include "allocator/virtual_backend.h"

namespace memcoord {
namespace {

TEST(TraceRecorderIo, AStalledTraceFileDoesNotBlockAllocations) {
  char dir_template[] = "/tmp/memcoord-recorder-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string fifo = std::string(dir_template) + "/trace.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  // A reader that reads nothing until told: the pipe (64 KiB) fills and every write to it blocks.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);

  VirtualBackend backend;
  CachingPool pool(backend);
  TraceRecorder recorder;
  ASSERT_TRUE(recorder.open(fifo, "stalled").ok());
  pool.set_recorder(&recorder);
  constexpr int kPairs = 50'000;  // ~2.5 MB of trace lines, 40 times the pipe's capacity
  std::future<void> work = std::async(std::launch::async, [&] {
    for (int i = 0; i < kPairs; ++i) {
      Result<void*> p = pool.allocate(512 + static_cast<std::size_t>(i % 64) * 512);
      ASSERT_TRUE(p.ok());
      ASSERT_TRUE(pool.deallocate(*p).ok());
    }
  });
  // Generous for a loaded 2-core machine: the loop takes tens of milliseconds when nothing blocks it.
  const bool finished = work.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  EXPECT_TRUE(finished) << "allocations blocked behind the stalled trace file";

  // Now read everything; the recorder's writer drains and close() completes.
  std::string text;
  std::thread drain([&] {
    const int flags = fcntl(reader, F_GETFL);
    fcntl(reader, F_SETFL, flags & ~O_NONBLOCK);
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = ::read(reader, buffer, sizeof buffer);
      if (n <= 0) break;
      text.append(buffer, static_cast<std::size_t>(n));
    }
  });
  work.wait();
  pool.set_recorder(nullptr);
  EXPECT_TRUE(recorder.close().ok());
  drain.join();
  ::close(reader);
  std::remove(fifo.c_str());
  std::remove(dir_template);

  Result<Trace> trace = ParseTrace(text, "fifo");
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->allocations, static_cast<std::uint64_t>(kPairs));
  EXPECT_EQ(trace->frees, static_cast<std::uint64_t>(kPairs));
}

}  // namespace
}  // namespace memcoord
