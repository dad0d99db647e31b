#include "allocator/trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "allocator/caching_pool.h"
#include "allocator/trace_recorder.h"
#include "allocator/trace_replay.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("memcoord_trace_test_" + std::to_string(getpid()) + "_" + name))
      .string();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

TEST(Trace, ParsesOurFormatSkippingPyTorchBookkeeping) {
  Result<Trace> t = ParseTrace(
      "# pytorch workload=unit; code addr size stream\n"
      "S 7f0000000000 20971520 0\n"
      "a 7f0000000000 1000 0\n"
      "a 7f0000100000 3000 7\n"
      "r 7f0000000000 1000 0\n"
      "f 7f0000000000 1000 0\n"
      "a 7f0000000000 500 0\n",
      "unit");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->workload, "unit");
  EXPECT_EQ(t->allocations, 3u);
  EXPECT_EQ(t->frees, 1u);
  EXPECT_EQ(t->peak_live_bytes, 4000u);
  ASSERT_EQ(t->events.size(), 4u);
  EXPECT_EQ(t->events[1].stream, 7u);
  EXPECT_EQ(t->events[2].slot, t->events[0].slot);  // the free names its allocation's slot
}

// The fifth field names the calling thread; threads are numbered densely as they first appear, and a trace
// without the field is one thread.
TEST(Trace, ThreadsAreNumberedAsTheyFirstAppear) {
  Result<Trace> t = ParseTrace(
      "# memcoord workload=unit; code addr size stream thread\n"
      "a 7f0000000000 1000 0 t4\n"
      "a 7f0000100000 3000 0 t0\n"
      "f 7f0000000000 1000 0 t0\n"
      "f 7f0000100000 3000 0 t4\n",
      "unit");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->threads, 2u);
  ASSERT_EQ(t->events.size(), 4u);
  EXPECT_EQ(t->events[0].thread, 0u);  // t4 came first
  EXPECT_EQ(t->events[1].thread, 1u);
  EXPECT_EQ(t->events[2].thread, 1u);  // a free by another thread than the allocation's
  EXPECT_EQ(t->events[3].thread, 0u);
  Result<Trace> plain = ParseTrace("a 7f00 100 0\nf 7f00 100 0\n", "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->threads, 1u);
  EXPECT_EQ(plain->events[1].thread, 0u);
  // A thread is its number: t01 and t1 are one thread, and a line without one is t0's.
  Result<Trace> padded =
      ParseTrace("a 7f00 100 0 t1\nf 7f00 100 0 t01\na 7f10 100 0\nf 7f10 100 0 t00\n", "padded");
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  EXPECT_EQ(padded->threads, 2u);
  EXPECT_EQ(padded->events[1].thread, 0u);
  EXPECT_EQ(padded->events[3].thread, 1u);

  std::string many;
  for (std::uint32_t i = 0; i <= kMaxTraceThreads; ++i)
    many += fmt::format("a {:x} 100 0 t{}\n", 0x1000 + i, i);
  Result<Trace> too_many = ParseTrace(many, "many");
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(
      too_many.status().message().find(fmt::format("line {}: thread 't{}' is past the {} threads",
                                                   kMaxTraceThreads + 1, kMaxTraceThreads, kMaxTraceThreads)),
      std::string::npos)
      << too_many.status().message();
}

TEST(Trace, AByteOrderMarkIsSkipped) {
  Result<Trace> t = ParseTrace(
      "\xEF\xBB\xBF"
      "a 7f00 100 0\nf 7f00 100 0\n",
      "bom");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->events.size(), 2u);
}

TEST(Trace, ParsesRmmCsv) {
  Result<Trace> t = ParseTrace(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,0.1,allocate,0x7f0000000000,4096,0x0\n"
      "1,0.2,allocate failure,0x0,99999999999,0x0\n"
      "1,0.3,allocate,0x7f0000001000,8192,0x0\n"
      "2,0.4,free,0x7f0000000000,4096,0x0\n",
      "rmm");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->format, "rmm-csv");
  EXPECT_EQ(t->threads, 2u);  // its Thread column
  EXPECT_EQ(t->events.back().thread, 1u);
  EXPECT_EQ(t->allocations, 2u);
  EXPECT_EQ(t->frees, 1u);
  EXPECT_EQ(t->peak_live_bytes, 12288u);
}

TEST(Trace, BadInputNamesTheLineAndTheAcceptedFormats) {
  struct Case {
    const char* text;
    const char* expect;
  } cases[] = {
      {"hello world\n", "unknown format"},
      {"a 7f00 100 0\nf 7f01 100 0\n", "line 2: free of 0x7f01, which is not live"},
      {"a 7f00 100 0\na 7f00 100 0\n", "line 2: allocation at 0x7f00, which is still live"},
      {"a 7f00 -5 0\n", "line 1: bad address, size or stream"},
      {"a zz 5 0\n", "line 1: bad address"},
      {"a 7f00 5\n", "line 1: cannot read"},
      {"x 7f00 5 0\n", "unknown format"},
      {"a 7f00 5 0\nq 7f00 5 0\n", "unknown event code 'q'"},
      {"# only a comment\n", "no allocation events"},
      {"Thread,Time,Action,Pointer,Size,Stream\n1,0,explode,0x1,5,0\n", "unknown action 'explode'"},
      {"Thread,Time,Action\n1,2,3\n", "lacks Action, Pointer or Size"},
      {"a 7f00 0 0\n", "allocation of 0 bytes"},
      {"a 7f00 5 0 thread1\n", "line 1: bad thread 'thread1' (a thread is t0, t1, ...)"},
      {"a 7f00 5 0 t\n", "line 1: bad thread 't'"},
      {"a 7f00 5 0 t1 x\n", "line 1: cannot read"},
  };
  for (const Case& c : cases) {
    Result<Trace> t = ParseTrace(c.text, "bad");
    ASSERT_FALSE(t.ok()) << c.text;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << c.text;
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("accepted"), std::string::npos) << t.status().message();
  }
  // A megabyte-long field is quoted short.
  for (const std::string& text : {"a 7f00 5 0 t" + std::string(1 << 20, '9') + "x\n",
                                  "a 7f00 5 0\n" + std::string(1 << 20, 'q') + " 7f00 5 0\n"}) {
    Result<Trace> t = ParseTrace(text, "long");
    ASSERT_FALSE(t.ok());
    EXPECT_LT(t.status().message().size(), 1000u);
    EXPECT_NE(t.status().message().find("... (1048"), std::string::npos)
        << t.status().message().substr(0, 300);
  }
}

TEST(Trace, GarbageTruncatedAndMissingFiles) {
  EXPECT_EQ(ReadTrace("/nonexistent/trace.gz").status().code(), StatusCode::kNotFound);

  const std::string garbage = TempPath("garbage.bin");
  std::string bytes(4096, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) % 251);
  WriteFile(garbage, bytes);
  Result<Trace> g = ReadTrace(garbage);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("garbage"), std::string::npos) << g.status().message();

  // A pickle (PyTorch's snapshot) is named as one, with the command that converts it.
  const std::string snapshot = TempPath("snapshot.pickle");
  WriteFile(snapshot, std::string("\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.", 14));
  Result<Trace> pickled = ReadTrace(snapshot);
  ASSERT_FALSE(pickled.ok());
  EXPECT_EQ(pickled.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pickled.status().message().find("is a Python pickle"), std::string::npos)
      << pickled.status().message();
  EXPECT_NE(pickled.status().message().find("python3 -m memcoord.snapshot_trace " + snapshot),
            std::string::npos)
      << pickled.status().message();

  // A real gzip stream cut in half.
  const std::string full = TempPath("full.gz");
  {
    gzFile f = gzopen(full.c_str(), "wb");
    for (int i = 0; i < 20000; ++i)
      gzprintf(f, "a %x 4096 0\nf %x 4096 0\n", 0x1000 + i * 16, 0x1000 + i * 16);
    gzclose(f);
  }
  std::ifstream in(full, std::ios::binary);
  std::string compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = TempPath("cut.gz");
  WriteFile(cut, compressed.substr(0, compressed.size() / 2));
  ASSERT_TRUE(ReadTrace(full).ok());
  Result<Trace> c = ReadTrace(cut);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kDataLoss) << c.status().ToString();
  EXPECT_NE(c.status().message().find("truncated"), std::string::npos) << c.status().message();
  for (const auto& p : {garbage, snapshot, full, cut}) std::remove(p.c_str());
}

TEST(TraceRecorder, APoolRecordsATraceThatReplaysToTheSamePeak) {
  const std::string path = TempPath("recorded.trace.gz");
  VirtualBackend backend(8 * kGiB);
  std::uint64_t peak_requested = 0;
  {
    CachingPool pool(backend);
    TraceRecorder recorder;
    ASSERT_TRUE(recorder.open(path, "unit").ok());
    pool.set_recorder(&recorder);
    std::vector<void*> live;
    for (int i = 0; i < 1000; ++i) {
      live.push_back(*pool.allocate(static_cast<std::size_t>((i * 7919) % 5000000 + 1)));
      if (i % 3 == 2) {
        ASSERT_TRUE(pool.deallocate(live.front()).ok());
        live.erase(live.begin());
      }
    }
    for (void* p : live) ASSERT_TRUE(pool.deallocate(p).ok());
    peak_requested = pool.stats().peak_requested_bytes;
    pool.set_recorder(nullptr);
    ASSERT_TRUE(recorder.close().ok());
  }
  Result<Trace> t = ReadTrace(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->workload, "unit");
  EXPECT_EQ(t->allocations, 1000u);
  EXPECT_EQ(t->frees, 1000u);
  EXPECT_EQ(t->peak_live_bytes, peak_requested);
  std::remove(path.c_str());

  TraceRecorder bad;
  EXPECT_EQ(bad.open("/nonexistent/dir/x.trace").code(), StatusCode::kInvalidArgument);
}

// Each line names its calling thread: a block allocated on one thread and freed on another reads back with
// both threads, numbered in the order they first recorded.
TEST(TraceRecorder, LinesNameTheThreadThatMadeTheCall) {
  const std::string path = TempPath("threads.trace");
  VirtualBackend backend(8 * kGiB);
  {
    CachingPool pool(backend);
    TraceRecorder recorder;
    ASSERT_TRUE(recorder.open(path, "threads").ok());
    pool.set_recorder(&recorder);
    void* mine = *pool.allocate(4096);
    void* theirs = nullptr;
    std::thread other([&] {
      theirs = *pool.allocate(8192);
      ASSERT_TRUE(pool.deallocate(mine).ok());
    });
    other.join();
    ASSERT_TRUE(pool.deallocate(theirs).ok());
    pool.set_recorder(nullptr);
    ASSERT_TRUE(recorder.close().ok());
  }
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("code addr size stream thread\n"), std::string::npos) << text;
  Result<Trace> t = ParseTrace(text, "threads");
  ASSERT_TRUE(t.ok()) << t.status().ToString() << "\n" << text;
  EXPECT_EQ(t->threads, 2u);
  ASSERT_EQ(t->events.size(), 4u);
  EXPECT_EQ(t->events[0].thread, 0u);  // this thread's allocation: t0
  EXPECT_EQ(t->events[1].thread, 1u);  // the other's allocation and its free of ours: t1
  EXPECT_EQ(t->events[2].thread, 1u);
  EXPECT_EQ(t->events[3].thread, 0u);
  EXPECT_NE(text.find(" t1\n"), std::string::npos) << text;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace memcoord
