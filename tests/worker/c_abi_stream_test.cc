// Streams at the C ABI with an instrumented host backend (injected through capi::InitWith): the stream
// given to a free is used, and memcoord_record_stream (Tensor.record_stream) keeps a block from being
// reused on another stream before the recorded stream's work, by a device-side wait the backend records.
// Also: several simulated devices each get their own backend, and capture routing on the host backend.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "allocator/host_backend.h"
#include "tests/support/forwarding_backend.h"
#include "worker/capi/runtime.h"
#include "worker/memcoord.h"

namespace {

using memcoord::StreamId;

// HostBackend that records every wait_for(waiter, producer) and the device it serves.
class RecordingBackend final : public memcoord::testing::ForwardingBackend<memcoord::HostBackend> {
 public:
  explicit RecordingBackend(int device) : ForwardingBackend(1ull << 30), device_(device) {}
  memcoord::Status wait_for(StreamId waiter, StreamId producer) override {
    std::lock_guard lock(mu_);
    waits_.emplace_back(waiter, producer);
    return memcoord::Status::Ok();
  }
  memcoord::DeviceInfo device_info() override {
    memcoord::DeviceInfo info = inner().device_info();
    info.device = device_;
    return info;
  }
  std::string_view kind() const override { return "host"; }
  // Markers are events on a GPU: counted here (and refused, as a backend without markers does), since a
  // pool must record none while a CUDA graph capture is underway on its device.
  memcoord::MarkerId record_marker(StreamId) override {
    markers_asked_.fetch_add(1);
    return memcoord::kNoMarker;
  }
  int markers_asked() const { return markers_asked_.load(); }

  std::vector<std::pair<StreamId, StreamId>> waits() {
    std::lock_guard lock(mu_);
    return waits_;
  }
  void clear() {
    std::lock_guard lock(mu_);
    waits_.clear();
  }

 private:
  int device_;
  std::atomic<int> markers_asked_{0};
  std::mutex mu_;
  std::vector<std::pair<StreamId, StreamId>> waits_;
};

class CAbiStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    memcoord::WorkerOptions options;
    // Built in place: assigning a temporary makes gcc 12 warn (-Wmaybe-uninitialized) about the optional's
    // string in some inlining choices.
    options.topology.emplace().source = "test";
    options.simulated_devices = 2;
    options.backend_factory =
        [this](int device) -> memcoord::Result<std::unique_ptr<memcoord::DeviceBackend>> {
      auto backend = std::make_unique<RecordingBackend>(device);
      backends_[device] = backend.get();
      return std::unique_ptr<memcoord::DeviceBackend>(std::move(backend));
    };
    ASSERT_EQ(memcoord::capi::InitWith(std::move(options)), 0) << memcoord_last_error();
  }
  void TearDown() override { EXPECT_EQ(memcoord_shutdown(), 0); }

  RecordingBackend* backends_[2] = {nullptr, nullptr};
};

void* Stream(std::uintptr_t id) { return reinterpret_cast<void*>(id); }

TEST_F(CAbiStreams, RecordStreamMakesTheNextUserWaitForThatStream) {
  void* p = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_record_stream(p, 2), 0) << memcoord_last_error();
  memcoord_torch_free(p, 1 << 20, 0, Stream(1));
  backends_[0]->clear();
  void* again = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_EQ(again, p);  // reused on its own stream...
  const auto waits = backends_[0]->waits();
  ASSERT_EQ(waits.size(), 1u);  // ...after stream 1 waits (on the device) for stream 2's work
  EXPECT_EQ(waits[0], std::make_pair(StreamId{1}, StreamId{2}));
  memcoord_torch_free(again, 1 << 20, 0, Stream(1));
}

TEST_F(CAbiStreams, RecordStreamFindsABlockOfANamedPool) {
  void* p = memcoord_alloc("kv", 1 << 20, 1);
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_record_stream(p, 2), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_free("kv", p), 0) << memcoord_last_error();
  backends_[0]->clear();
  void* again = memcoord_alloc("kv", 1 << 20, 1);
  ASSERT_EQ(again, p);
  const auto waits = backends_[0]->waits();
  ASSERT_EQ(waits.size(), 1u);  // stream 1 waits for stream 2's work before reusing it
  EXPECT_EQ(waits[0], std::make_pair(StreamId{1}, StreamId{2}));
  EXPECT_EQ(memcoord_free("kv", again), 0);
}

TEST_F(CAbiStreams, WithoutRecordStreamReuseOnTheSameStreamWaitsForNothing) {
  void* p = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_NE(p, nullptr);
  memcoord_torch_free(p, 1 << 20, 0, Stream(1));
  backends_[0]->clear();
  void* again = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  EXPECT_EQ(again, p);
  EXPECT_TRUE(backends_[0]->waits().empty());
  memcoord_torch_free(again, 1 << 20, 0, Stream(1));
}

TEST_F(CAbiStreams, TheFreesStreamIsUsed) {
  // Allocated on stream 1, last used and freed on stream 3: reuse on 1 waits for 3's work.
  void* p = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_NE(p, nullptr);
  memcoord_torch_free(p, 1 << 20, 0, Stream(3));
  backends_[0]->clear();
  void* again = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_EQ(again, p);
  const auto waits = backends_[0]->waits();
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0], std::make_pair(StreamId{1}, StreamId{3}));
  memcoord_torch_free(again, 1 << 20, 0, Stream(1));
}

TEST_F(CAbiStreams, TorchRecordStreamHookOnAnotherDevicesBlock) {
  void* p = memcoord_torch_malloc(4096, 1, Stream(5));
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  ASSERT_NE(backends_[1], nullptr);  // device 1 got its own backend
  memcoord_torch_record_stream(p, Stream(6));
  memcoord_torch_free(p, 4096, 1, Stream(5));
  backends_[1]->clear();
  void* again = memcoord_torch_malloc(4096, 1, Stream(5));
  ASSERT_EQ(again, p);
  ASSERT_EQ(backends_[1]->waits().size(), 1u);
  EXPECT_EQ(backends_[1]->waits()[0], std::make_pair(StreamId{5}, StreamId{6}));
  EXPECT_TRUE(backends_[0]->waits().empty());
  memcoord_torch_free(again, 4096, 1, Stream(5));
}

// Capture routing on the host backend: while a private pool routes stream 7, its allocations come from
// that pool (counted in the device's stats), other streams still use the default pool, and releasing the
// pool destroys it once its last block is freed.
int OnlyStream7(std::uintptr_t stream, void*) { return stream == 7 ? 1 : 0; }

memcoord_device_stats Stats(int device) {
  memcoord_device_stats s{};
  s.struct_size = sizeof(s);
  EXPECT_EQ(memcoord_device_stats_get(device, &s), 0) << memcoord_last_error();
  return s;
}

TEST_F(CAbiStreams, CaptureAllocationsGoToThePrivatePool) {
  ASSERT_EQ(memcoord_begin_allocate_to_pool(0, 1, 42, OnlyStream7, nullptr), 0) << memcoord_last_error();
  EXPECT_EQ(memcoord_begin_allocate_to_pool(0, 1, 42, OnlyStream7, nullptr),
            MEMCOORD_ERR_FAILED_PRECONDITION);
  void* captured = memcoord_torch_malloc(1 << 20, 0, Stream(7));
  void* outside = memcoord_torch_malloc(1 << 20, 0, Stream(8));
  ASSERT_TRUE(captured != nullptr && outside != nullptr) << memcoord_last_error();
  void* via_primary = memcoord_device_alloc(-1, 4096, 7);  // -1 is device 0: routed the same way
  ASSERT_NE(via_primary, nullptr) << memcoord_last_error();
  EXPECT_EQ(Stats(0).pools, 2);  // the default pool and the capture's
  EXPECT_EQ(Stats(0).allocated_bytes, (2u << 20) + 4096);
  ASSERT_EQ(memcoord_device_free(-1, via_primary, 7), 0) << memcoord_last_error();
  EXPECT_EQ(Stats(0).allocated_bytes, 2u << 20);
  ASSERT_EQ(memcoord_end_allocate_to_pool(0, 1, 42), 0) << memcoord_last_error();
  void* after = memcoord_torch_malloc(4096, 0, Stream(7));  // routing ended: the default pool
  ASSERT_NE(after, nullptr);
  ASSERT_EQ(memcoord_release_pool(0, 1, 42), 0);
  EXPECT_EQ(Stats(0).pools, 2);  // still holds `captured`
  memcoord_torch_free(captured, 1 << 20, 0, Stream(7));
  EXPECT_EQ(Stats(0).pools, 1);  // released with its last block
  memcoord_torch_free(outside, 1 << 20, 0, Stream(8));
  memcoord_torch_free(after, 4096, 0, Stream(7));
  EXPECT_EQ(Stats(0).allocated_bytes, 0u);
}

// While a capture routes allocations of device 0, the device's pools (the default one and a named one) make
// no marker (a CUDA event: recording or querying one can invalidate a capture) on their misses; device 1's
// pools and, after the route ends, device 0's make them again.
TEST_F(CAbiStreams, DuringACaptureTheDevicesPoolsRecordNoMarker) {
  void* named_before = memcoord_alloc("side", 4096, 0);  // the named pool exists before the capture begins
  ASSERT_NE(named_before, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_begin_allocate_to_pool(0, 1, 43, OnlyStream7, nullptr), 0) << memcoord_last_error();
  const int device0_before = backends_[0]->markers_asked();
  void* missed = memcoord_torch_malloc(64 << 20, 0, Stream(8));  // not the capture's stream: default pool
  void* named = memcoord_alloc("side", 64 << 20, 8);
  ASSERT_TRUE(missed != nullptr && named != nullptr) << memcoord_last_error();
  EXPECT_EQ(backends_[0]->markers_asked(), device0_before);
  void* other_device = memcoord_torch_malloc(64 << 20, 1, Stream(8));
  ASSERT_NE(other_device, nullptr) << memcoord_last_error();
  EXPECT_GT(backends_[1]->markers_asked(), 0);
  ASSERT_EQ(memcoord_end_allocate_to_pool(0, 1, 43), 0) << memcoord_last_error();
  void* after = memcoord_torch_malloc(128 << 20, 0, Stream(8));
  ASSERT_NE(after, nullptr) << memcoord_last_error();
  EXPECT_GT(backends_[0]->markers_asked(), device0_before);
  ASSERT_EQ(memcoord_release_pool(0, 1, 43), 0);
  memcoord_torch_free(missed, 64 << 20, 0, Stream(8));
  memcoord_torch_free(after, 128 << 20, 0, Stream(8));
  memcoord_torch_free(other_device, 64 << 20, 1, Stream(8));
  EXPECT_EQ(memcoord_free("side", named), 0) << memcoord_last_error();
  EXPECT_EQ(memcoord_free("side", named_before), 0) << memcoord_last_error();
}

// A named pool made while a capture routes device 0's allocations is told as the pools made before it:
// its misses record no marker until the route ends.
TEST_F(CAbiStreams, ANamedPoolMadeDuringACaptureRecordsNoMarkerUntilItEnds) {
  ASSERT_EQ(memcoord_begin_allocate_to_pool(0, 1, 44, OnlyStream7, nullptr), 0) << memcoord_last_error();
  const int before = backends_[0]->markers_asked();
  void* first = memcoord_alloc("late", 64 << 20, 8);  // makes the pool, and misses
  void* second = memcoord_alloc("late", 64 << 20, 8);
  ASSERT_TRUE(first != nullptr && second != nullptr) << memcoord_last_error();
  EXPECT_EQ(backends_[0]->markers_asked(), before);
  ASSERT_EQ(memcoord_end_allocate_to_pool(0, 1, 44), 0) << memcoord_last_error();
  void* after = memcoord_alloc("late", 64 << 20, 8);
  ASSERT_NE(after, nullptr) << memcoord_last_error();
  EXPECT_GT(backends_[0]->markers_asked(), before);
  ASSERT_EQ(memcoord_release_pool(0, 1, 44), 0);
  for (void* p : {first, second, after}) {
    EXPECT_EQ(memcoord_free("late", p), 0) << memcoord_last_error();
  }
}

// The capture check on the allocation path, with a counting check injected in place of the CUDA one
// (cudaStreamIsCapturing): a cache hit on the stream's own blocks makes no check (no CUDA call); anything
// that could reach the backend (a miss, another stream's block, a recorded block) checks first, and a
// capturing stream then fails before the backend is touched.
std::atomic<int> g_capture_checks{0};
std::atomic<StreamId> g_capturing{0};  // the stream the fake check reports as capturing (0: none)

memcoord::Status CountingCaptureCheck(StreamId stream) {
  g_capture_checks.fetch_add(1);
  if (stream != 0 && stream == g_capturing.load()) {
    return memcoord::FailedPrecondition("fake capture: stream is being captured");
  }
  return memcoord::Status::Ok();
}

class CAbiCaptureCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    g_capture_checks = 0;
    g_capturing = 0;
    memcoord::WorkerOptions options;
    options.topology = memcoord::Topology{0, 0, 1, "test"};
    options.backend_factory =
        [this](int device) -> memcoord::Result<std::unique_ptr<memcoord::DeviceBackend>> {
      auto backend = std::make_unique<RecordingBackend>(device);
      backend_ = backend.get();
      return std::unique_ptr<memcoord::DeviceBackend>(std::move(backend));
    };
    ASSERT_EQ(memcoord::capi::InitWith(std::move(options), &CountingCaptureCheck), 0)
        << memcoord_last_error();
  }
  void TearDown() override { EXPECT_EQ(memcoord_shutdown(), 0); }

  RecordingBackend* backend_ = nullptr;
};

TEST_F(CAbiCaptureCheck, CacheHitsMakeNoCaptureQuery) {
  void* p = memcoord_torch_malloc(1 << 20, 0, Stream(1));  // a miss: checked
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  EXPECT_EQ(g_capture_checks.load(), 1);
  memcoord_torch_free(p, 1 << 20, 0, Stream(1));
  for (int i = 0; i < 100; ++i) {
    void* again = memcoord_torch_malloc(1 << 20, 0, Stream(1));
    ASSERT_EQ(again, p);
    memcoord_torch_free(again, 1 << 20, 0, Stream(1));
  }
  EXPECT_EQ(g_capture_checks.load(), 1);  // the 100 hits asked nothing
}

TEST_F(CAbiCaptureCheck, WhatCouldReachTheBackendIsCheckedFirst) {
  void* p = memcoord_torch_malloc(1 << 20, 0, Stream(1));
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  memcoord_torch_free(p, 1 << 20, 0, Stream(1));
  g_capturing = 9;
  g_capture_checks = 0;
  // Stream 1's cached block on stream 9 would need a device-side wait: checked, refused, nothing waited.
  EXPECT_EQ(memcoord_torch_malloc(1 << 20, 0, Stream(9)), nullptr);
  EXPECT_NE(std::string(memcoord_last_error()).find("being captured"), std::string::npos);
  EXPECT_EQ(memcoord_torch_malloc(4 << 20, 0, Stream(9)), nullptr);  // a miss would map memory
  EXPECT_EQ(g_capture_checks.load(), 2);
  EXPECT_TRUE(backend_->waits().empty());
  // A block of stream 9 recorded on stream 2 before the capture: its reuse needs a wait, so it is checked.
  g_capturing = 0;
  void* q = memcoord_torch_malloc(4096, 0, Stream(9));
  ASSERT_NE(q, nullptr) << memcoord_last_error();
  ASSERT_EQ(memcoord_record_stream(q, 2), 0) << memcoord_last_error();
  memcoord_torch_free(q, 4096, 0, Stream(9));
  g_capturing = 9;
  g_capture_checks = 0;
  backend_->clear();
  EXPECT_EQ(memcoord_torch_malloc(4096, 0, Stream(9)), nullptr);
  EXPECT_EQ(g_capture_checks.load(), 1);
  EXPECT_TRUE(backend_->waits().empty());
  g_capturing = 0;
}

// A named pool's allocation is checked as a device pool's: a miss on a capturing stream fails at once.
TEST_F(CAbiCaptureCheck, NamedPoolsAreCheckedToo) {
  void* p = memcoord_alloc("kv", 1 << 20, 1);
  ASSERT_NE(p, nullptr) << memcoord_last_error();
  EXPECT_EQ(g_capture_checks.load(), 1);
  ASSERT_EQ(memcoord_free("kv", p), 0);
  void* hit = memcoord_alloc("kv", 1 << 20, 1);  // a hit: asks nothing
  EXPECT_EQ(hit, p);
  EXPECT_EQ(g_capture_checks.load(), 1);
  ASSERT_EQ(memcoord_free("kv", hit), 0);
  g_capturing = 9;
  EXPECT_EQ(memcoord_alloc("kv", 8 << 20, 9), nullptr);
  EXPECT_NE(std::string(memcoord_last_error()).find("being captured"), std::string::npos)
      << memcoord_last_error();
  EXPECT_EQ(g_capture_checks.load(), 2);
  g_capturing = 0;
}

}  // namespace
