// Run-time GPU detection: the one test here that runs (never skips) on machines with and without a GPU.
// Without one, every probe must say "no GPU" cleanly and every CUDA backend kind must refuse with
// UNAVAILABLE; with one, the backends must be created and describe the device.
#include <gtest/gtest.h>

#include "allocator/backend_factory.h"
#include "allocator/cuda/cuda_backends.h"

namespace memcoord {
namespace {

TEST(RuntimeDetection, ProbesAgreeAndCudaKindsFollowThem) {
  const bool gpu = CudaGpuAvailable();
  EXPECT_EQ(GpuAvailable(), gpu);
  Result<int> count = CudaDeviceCount();
  if (!gpu) {
    EXPECT_TRUE(!count.ok() || *count == 0);
    if (!count.ok()) {
      EXPECT_EQ(count.status().code(), StatusCode::kUnavailable) << count.status().ToString();
    }
  }
  for (const char* kind : {"cuda", "cuda-vmm", "pinned-host"}) {
    Result<std::unique_ptr<DeviceBackend>> backend = MakeCudaBackend(kind, 0);
    if (!gpu) {
      ASSERT_FALSE(backend.ok()) << kind;
      EXPECT_EQ(backend.status().code(), StatusCode::kUnavailable) << backend.status().ToString();
      continue;
    }
    ASSERT_TRUE(backend.ok()) << kind << ": " << backend.status().ToString();
    EXPECT_EQ((*backend)->kind(), kind);
    const DeviceInfo info = (*backend)->device_info();
    EXPECT_EQ(info.kind, kind);
    EXPECT_GT(info.total_bytes, 0u);
    EXPECT_GT(info.free_bytes, 0u);
    EXPECT_LE(info.free_bytes, info.total_bytes);
    EXPECT_EQ(info.device_memory, std::string_view(kind) != "pinned-host");
    std::printf("[   INFO   ] %s: %s, device %d, %llu of %llu bytes free, chunk %zu\n", kind,
                info.name.c_str(), info.device, static_cast<unsigned long long>(info.free_bytes),
                static_cast<unsigned long long>(info.total_bytes), (*backend)->chunk_bytes());
  }
  Result<std::unique_ptr<DeviceBackend>> bad = MakeCudaBackend("cuda", gpu ? 4096 : 0);
  EXPECT_FALSE(bad.ok());
  Result<std::unique_ptr<DeviceBackend>> other = MakeCudaBackend("host", 0);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace memcoord
