// LimitAdaptor alone over a backend that counts its calls: over the limit the upstream is never called, an
// upstream failure rolls the count back, released memory is room again.
#include "allocator/limit_adaptor.h"

#include <gtest/gtest.h>

#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

class CountingBackend final : public DeviceBackend {
 public:
  int allocates = 0;
  int maps = 0;
  int piece_runs = 0;  // map_pieces calls that reached this backend
  bool fail = false;
  int maps_before_failing = -1;  // >= 0: that many more maps succeed, then every map fails

  std::size_t chunk_bytes() const override { return inner_.chunk_bytes(); }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override { return inner_.reserve_address(bytes); }
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override {
    inner_.free_address(base, bytes);
  }
  Status map(std::uintptr_t a, std::size_t bytes) override {
    ++maps;
    if (maps_before_failing == 0) fail = true;
    if (maps_before_failing > 0) --maps_before_failing;
    if (fail) return Unavailable("counting backend: told to fail");
    return inner_.map(a, bytes);
  }
  Status map_pieces(std::uintptr_t a, std::span<const std::size_t> pieces) override {
    ++piece_runs;
    return DeviceBackend::map_pieces(a, pieces);  // piece by piece through map()
  }
  void unmap(std::uintptr_t a, std::size_t bytes) noexcept override { inner_.unmap(a, bytes); }
  DeviceInfo device_info() override { return inner_.device_info(); }
  std::string_view kind() const override { return "counting"; }
  std::uint64_t used_bytes() const { return inner_.used_bytes(); }

 private:
  Result<void*> do_allocate(std::size_t bytes) override {
    ++allocates;
    if (fail) return Unavailable("counting backend: told to fail");
    return inner_.allocate(bytes);
  }
  void do_release(void* p, std::size_t bytes) noexcept override { inner_.release(p, bytes); }

  VirtualBackend inner_{kGiB};
};

TEST(LimitAdaptor, OverTheLimitNeverTouchesTheUpstream) {
  CountingBackend backend;
  LimitAdaptor limit(backend, 8 * kMiB, "pool 'p'");
  Result<std::uintptr_t> range = limit.reserve_address(64 * kMiB);
  ASSERT_TRUE(range.ok());
  ASSERT_TRUE(limit.map(*range, 6 * kMiB).ok());
  Status over = limit.map(*range + 6 * kMiB, 4 * kMiB);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("the limit of pool 'p'"), std::string::npos) << over.message();
  EXPECT_EQ(backend.maps, 1);
  Result<void*> segment = limit.allocate(4 * kMiB);
  EXPECT_EQ(segment.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(backend.allocates, 0);
  EXPECT_EQ(limit.used_bytes(), 6 * kMiB);
  EXPECT_EQ(backend.used_bytes(), 6 * kMiB);
  limit.unmap(*range, 6 * kMiB);
  limit.free_address(*range, 64 * kMiB);
}

TEST(LimitAdaptor, AnUpstreamFailureRollsTheCountBack) {
  CountingBackend backend;
  LimitAdaptor limit(backend, 8 * kMiB);
  backend.fail = true;
  EXPECT_EQ(limit.allocate(2 * kMiB).status().code(), StatusCode::kUnavailable);
  Result<std::uintptr_t> range = limit.reserve_address(8 * kMiB);
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(limit.map(*range, 2 * kMiB).code(), StatusCode::kUnavailable);
  EXPECT_EQ(limit.used_bytes(), 0u);
  backend.fail = false;
  EXPECT_TRUE(limit.map(*range, 8 * kMiB).ok()) << "the failed calls still count against the limit";
  limit.unmap(*range, 8 * kMiB);
  limit.free_address(*range, 8 * kMiB);
}

// A run of pieces is counted whole against the limit and passed down in one call; a piece that fails midway
// leaves nothing mapped and nothing counted.
TEST(LimitAdaptor, MapPiecesCountsTheRunWholeAndPassesItDownInOneCall) {
  CountingBackend backend;
  LimitAdaptor limit(backend, 8 * kMiB);
  Result<std::uintptr_t> range = limit.reserve_address(16 * kMiB);
  ASSERT_TRUE(range.ok());
  const std::size_t three[] = {2 * kMiB, 2 * kMiB, 2 * kMiB};
  ASSERT_TRUE(limit.map_pieces(*range, three).ok());
  EXPECT_EQ(backend.piece_runs, 1);
  EXPECT_EQ(backend.maps, 3);
  EXPECT_EQ(limit.used_bytes(), 6 * kMiB);
  const std::size_t two[] = {2 * kMiB, 2 * kMiB};
  EXPECT_EQ(limit.map_pieces(*range + 6 * kMiB, two).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(backend.piece_runs, 1) << "a run over the limit never reaches the upstream";
  limit.unmap(*range, 6 * kMiB);

  backend.maps_before_failing = 2;
  EXPECT_EQ(limit.map_pieces(*range, three).code(), StatusCode::kUnavailable);
  EXPECT_EQ(backend.maps, 6);
  EXPECT_EQ(limit.used_bytes(), 0u);
  EXPECT_EQ(backend.used_bytes(), 0u) << "the two pieces mapped before the failure are unmapped";
  limit.free_address(*range, 16 * kMiB);
}

TEST(LimitAdaptor, ReleasedMemoryIsRoomAgainAndAddressSpaceIsNotCounted) {
  CountingBackend backend;
  LimitAdaptor limit(backend, 4 * kMiB);
  Result<std::uintptr_t> range = limit.reserve_address(256 * kMiB);  // far above the limit: not memory
  ASSERT_TRUE(range.ok());
  Result<void*> a = limit.allocate(4 * kMiB);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(limit.map(*range, 2 * kMiB).ok());
  limit.release(*a, 4 * kMiB);
  EXPECT_EQ(limit.used_bytes(), 0u);
  EXPECT_TRUE(limit.map(*range, 4 * kMiB).ok());
  limit.unmap(*range, 4 * kMiB);
  limit.free_address(*range, 256 * kMiB);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

TEST(LimitAdaptor, ALimitBelowUseRefusesUntilEnoughIsReleasedAndZeroRemovesIt) {
  CountingBackend backend;
  LimitAdaptor limit(backend);
  EXPECT_EQ(limit.limit_bytes(), 0u);
  Result<void*> a = limit.allocate(6 * kMiB);
  Result<void*> b = limit.allocate(6 * kMiB);
  ASSERT_TRUE(a.ok() && b.ok());
  limit.set_limit(8 * kMiB);
  EXPECT_EQ(limit.bytes_over_budget(0), 4 * kMiB);
  EXPECT_EQ(limit.allocate(512).status().code(), StatusCode::kResourceExhausted);
  limit.release(*a, 6 * kMiB);
  EXPECT_EQ(limit.bytes_over_budget(2 * kMiB), 0u);
  EXPECT_EQ(limit.bytes_over_budget(3 * kMiB), kMiB);
  Result<void*> c = limit.allocate(2 * kMiB);
  ASSERT_TRUE(c.ok());
  limit.set_limit(0);
  EXPECT_EQ(limit.bytes_over_budget(kGiB), 0u);
  Result<void*> d = limit.allocate(64 * kMiB);
  ASSERT_TRUE(d.ok());
  limit.release(*b, 6 * kMiB);
  limit.release(*c, 2 * kMiB);
  limit.release(*d, 64 * kMiB);
  EXPECT_EQ(limit.used_bytes(), 0u);
}

TEST(LimitAdaptor, ForwardsWhatItDoesNotLimit) {
  CountingBackend backend;
  LimitAdaptor limit(backend, kMiB);
  EXPECT_EQ(limit.kind(), "counting");
  EXPECT_EQ(limit.chunk_bytes(), backend.chunk_bytes());
  EXPECT_EQ(limit.device_info().total_bytes, backend.device_info().total_bytes);
  EXPECT_TRUE(limit.stream_idle(0x51));
}

}  // namespace
}  // namespace memcoord
