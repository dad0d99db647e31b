#include "allocator/host_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "allocator/backend_factory.h"
#include "allocator/caching_pool.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

TEST(HostBackend, EveryAllocatedByteIsWrittenAndReadBack) {
  HostBackend backend(kGiB);
  CachingPool pool(backend);
  std::mt19937_64 rng(7);
  std::vector<std::pair<unsigned char*, std::size_t>> live;
  for (int round = 0; round < 3000; ++round) {
    if (live.size() < 64 && (live.empty() || rng() % 3 != 0)) {
      const std::size_t bytes = std::uniform_int_distribution<std::size_t>(1, 3 * kMiB)(rng);
      auto* p = static_cast<unsigned char*>(*pool.allocate(bytes));
      std::memset(p, static_cast<int>(reinterpret_cast<std::uintptr_t>(p) >> 9), bytes);
      live.emplace_back(p, bytes);
    } else {
      const std::size_t i = rng() % live.size();
      auto [p, bytes] = live[i];
      const auto expect = static_cast<unsigned char>(reinterpret_cast<std::uintptr_t>(p) >> 9);
      const std::size_t first_bad = static_cast<std::size_t>(
          std::find_if(p, p + bytes, [&](unsigned char c) { return c != expect; }) - p);
      ASSERT_EQ(first_bad, bytes) << "byte " << first_bad << " of " << bytes << " changed";
      ASSERT_TRUE(pool.deallocate(p).ok());
      live[i] = live.back();
      live.pop_back();
    }
    if (round % 500 == 499) pool.trim(0);
  }
  for (auto [p, bytes] : live) ASSERT_TRUE(pool.deallocate(p).ok());
  pool.trim(0);
  EXPECT_EQ(backend.used_bytes(), 0u);
}

TEST(HostBackend, CapacityIsACap) {
  HostBackend backend(64 * kMiB);
  CachingPool pool(backend);
  void* a = *pool.allocate(40 * kMiB);
  Result<void*> b = pool.allocate(40 * kMiB);
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(b.status().message().find("host"), std::string::npos);
  ASSERT_TRUE(pool.deallocate(a).ok());
  EXPECT_TRUE(pool.allocate(40 * kMiB).ok());
}

TEST(HostBackend, SegmentsWorkToo) {
  HostBackend backend(256 * kMiB);
  Result<void*> p = backend.allocate(3 * kMiB);
  ASSERT_TRUE(p.ok());
  std::memset(*p, 0x5a, 3 * kMiB);
  EXPECT_EQ(static_cast<unsigned char*>(*p)[3 * kMiB - 1], 0x5a);
  backend.release(*p, 3 * kMiB);
  EXPECT_EQ(backend.used_bytes(), 0u);
  EXPECT_EQ(backend.allocate(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(backend.map(12345, 4096).code(), StatusCode::kInvalidArgument);
}

TEST(BackendFactory, KnownKindsAndAClearErrorForOthers) {
  EXPECT_TRUE(MakeBackend("virtual").ok());
  EXPECT_TRUE(MakeBackend("host", {.capacity_bytes = kGiB}).ok());
  Result<std::unique_ptr<DeviceBackend>> auto_kind = MakeBackend("auto", {.capacity_bytes = kGiB});
  ASSERT_TRUE(auto_kind.ok());
  EXPECT_EQ((*auto_kind)->kind(), GpuAvailable() ? "cuda-vmm" : "host");
  Result<std::unique_ptr<DeviceBackend>> bad = MakeBackend("tpu");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("accepted: virtual, host"), std::string::npos);
  if (!GpuAvailable()) {
    EXPECT_EQ(MakeBackend("cuda").status().code(), StatusCode::kUnavailable);
  }
}

}  // namespace
}  // namespace memcoord
