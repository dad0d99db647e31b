// The cuda-vmm backend's mapping half on a real GPU: chunks of the device's granularity (2 MiB on an H200)
// mapped into a reserved range, written and read back by kernels; every other chunk unmapped (the driver's
// free memory must rise by exactly that much) while the data in the chunks left mapped survives; holes mapped
// again; everything unmapped gives all memory back. A run mapped as pieces (map_pieces) is one allocation per
// piece with its access set once. Misuse is refused before it reaches the driver.
#include <gtest/gtest.h>

#include <vector>

#include "allocator/cuda/cuda_vmm_backend.h"
#include "tests/gpu/gpu_test_support.h"

namespace memcoord {
namespace {

using gpu_test::DeviceFreeBytes;
using gpu_test::LaunchCheck;
using gpu_test::LaunchFill;

constexpr std::uint64_t kMiB = std::uint64_t{1} << 20;

class CudaVmmMapping : public ::testing::Test {
 protected:
  void SetUp() override {
    MEMCOORD_SKIP_WITHOUT_GPU();
    Result<std::unique_ptr<CudaVmmBackend>> made = CudaVmmBackend::Create(0);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    backend_ = std::move(made).value();
  }
  std::unique_ptr<CudaVmmBackend> backend_;
};

TEST_F(CudaVmmMapping, ChunksMapUnmapAndReturnMemory) {
  CudaVmmBackend& vmm = *backend_;
  const std::size_t chunk = vmm.chunk_bytes();
  ASSERT_GE(chunk, std::size_t{2} << 20);
  ASSERT_EQ(chunk & (chunk - 1), 0u);
  const std::size_t kChunks = 512;  // 1 GiB with 2 MiB chunks
  const std::size_t bytes = kChunks * chunk;
  gpu_test::TestStream stream;
  gpu_test::MismatchCounter mismatches;
  ASSERT_TRUE(stream.ok() && mismatches.ok());

  const std::uint64_t free_start = DeviceFreeBytes();
  Result<std::uintptr_t> base = vmm.reserve_address(2 * bytes);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(*base % chunk, 0u);
  EXPECT_GE(DeviceFreeBytes() + 2 * kMiB, free_start) << "reserving address space must take no memory";

  // One map call per chunk: each chunk is its own physical allocation, so each can be unmapped alone.
  for (std::size_t i = 0; i < kChunks; ++i) ASSERT_TRUE(vmm.map(*base + i * chunk, chunk).ok()) << i;
  const std::uint64_t free_mapped = DeviceFreeBytes();
  EXPECT_EQ(vmm.held_bytes(), bytes);
  EXPECT_EQ(vmm.mapping_count(), kChunks);
  EXPECT_GE(free_start - free_mapped, bytes - 2 * kMiB) << "mapping must take the memory";
  auto chunk_ptr = [&](std::size_t i) { return reinterpret_cast<void*>(*base + i * chunk); };
  for (std::size_t i = 0; i < kChunks; ++i) {
    MEMCOORD_CUDA_OK(LaunchFill(chunk_ptr(i), chunk, static_cast<std::uint32_t>(i + 1), stream.id()));
  }
  ASSERT_TRUE(vmm.synchronize(stream.id()).ok());

  // Unmap every other chunk: the driver gets exactly those back.
  for (std::size_t i = 0; i < kChunks; i += 2) vmm.unmap(*base + i * chunk, chunk);
  const std::uint64_t free_holes = DeviceFreeBytes();
  EXPECT_EQ(vmm.held_bytes(), bytes / 2);
  EXPECT_GE(free_holes - free_mapped, bytes / 2 - 2 * kMiB);
  EXPECT_LE(free_holes - free_mapped, bytes / 2 + 2 * kMiB);
  for (std::size_t i = 1; i < kChunks; i += 2) {  // the chunks left mapped kept their data
    MEMCOORD_CUDA_OK(
        LaunchCheck(chunk_ptr(i), chunk, static_cast<std::uint32_t>(i + 1), mismatches.get(), stream.id()));
  }
  EXPECT_EQ(mismatches.Read(), 0u);

  // Map the holes again, two chunks at a time where they are adjacent: fresh memory, usable at once.
  for (std::size_t i = 0; i < kChunks; i += 2) {
    ASSERT_TRUE(vmm.map(*base + i * chunk, chunk).ok()) << i;
    MEMCOORD_CUDA_OK(LaunchFill(chunk_ptr(i), chunk, static_cast<std::uint32_t>(i + 1), stream.id()));
  }
  for (std::size_t i = 0; i < kChunks; ++i) {
    MEMCOORD_CUDA_OK(
        LaunchCheck(chunk_ptr(i), chunk, static_cast<std::uint32_t>(i + 1), mismatches.get(), stream.id()));
  }
  EXPECT_EQ(mismatches.Read(), 0u);
  EXPECT_EQ(vmm.held_bytes(), bytes);

  // The second half of the reservation as one map call spanning many chunks: one physical allocation.
  ASSERT_TRUE(vmm.map(*base + bytes, bytes).ok());
  EXPECT_EQ(vmm.mapping_count(), kChunks + 1);
  MEMCOORD_CUDA_OK(LaunchFill(chunk_ptr(kChunks), bytes, 77, stream.id()));
  MEMCOORD_CUDA_OK(LaunchCheck(chunk_ptr(kChunks), bytes, 77, mismatches.get(), stream.id()));
  EXPECT_EQ(mismatches.Read(), 0u);

  vmm.unmap(*base, 2 * bytes);
  vmm.free_address(*base, 2 * bytes);
  EXPECT_EQ(vmm.held_bytes(), 0u);
  const std::uint64_t free_end = DeviceFreeBytes();
  EXPECT_GE(free_end + 2 * kMiB, free_start) << "all memory must be back";
  std::printf(
      "[   INFO   ] free MiB: start %llu, 1 GiB mapped %llu, half unmapped %llu, all unmapped %llu\n",
      static_cast<unsigned long long>(free_start / kMiB), static_cast<unsigned long long>(free_mapped / kMiB),
      static_cast<unsigned long long>(free_holes / kMiB), static_cast<unsigned long long>(free_end / kMiB));
}

// map_pieces: one physical allocation per piece (each unmapped alone later), the access of the whole run set
// at once, so kernels read and write every piece; all or nothing on misuse and on the driver running out.
TEST_F(CudaVmmMapping, PiecesAreSeparateAllocationsUsableAcrossTheRun) {
  CudaVmmBackend& vmm = *backend_;
  const std::size_t chunk = vmm.chunk_bytes();
  gpu_test::TestStream stream;
  gpu_test::MismatchCounter mismatches;
  ASSERT_TRUE(stream.ok() && mismatches.ok());
  Result<std::uintptr_t> base = vmm.reserve_address(64 * chunk);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  auto at = [&](std::size_t chunks) { return reinterpret_cast<void*>(*base + chunks * chunk); };

  const std::size_t pieces[] = {10 * chunk, 10 * chunk, 3 * chunk};
  ASSERT_TRUE(vmm.map_pieces(*base, pieces).ok());
  EXPECT_EQ(vmm.mapping_count(), 3u);
  EXPECT_EQ(vmm.held_bytes(), 23 * chunk);
  MEMCOORD_CUDA_OK(LaunchFill(at(0), 23 * chunk, 5, stream.id()));
  MEMCOORD_CUDA_OK(LaunchCheck(at(0), 23 * chunk, 5, mismatches.get(), stream.id()));
  EXPECT_EQ(mismatches.Read(), 0u);

  // The pattern is a function of the word's offset from the pointer given: each outer piece gets its own.
  MEMCOORD_CUDA_OK(LaunchFill(at(0), 10 * chunk, 6, stream.id()));
  MEMCOORD_CUDA_OK(LaunchFill(at(20), 3 * chunk, 7, stream.id()));
  ASSERT_TRUE(vmm.synchronize(stream.id()).ok());
  vmm.unmap(*base + 10 * chunk, 10 * chunk);  // the middle piece alone
  EXPECT_EQ(vmm.mapping_count(), 2u);
  EXPECT_EQ(vmm.held_bytes(), 13 * chunk);
  MEMCOORD_CUDA_OK(LaunchCheck(at(0), 10 * chunk, 6, mismatches.get(), stream.id()));
  MEMCOORD_CUDA_OK(LaunchCheck(at(20), 3 * chunk, 7, mismatches.get(), stream.id()));
  EXPECT_EQ(mismatches.Read(), 0u) << "the pieces left mapped keep their data and their access";

  const std::size_t overlapping[] = {8 * chunk, 4 * chunk};  // the second piece runs into the mapped third
  EXPECT_EQ(vmm.map_pieces(*base + 10 * chunk, overlapping).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vmm.map_pieces(*base + 10 * chunk, {}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vmm.mapping_count(), 2u);
  const std::size_t too_much[] = {2 * chunk, (vmm.device_info().free_bytes / chunk + 64) * chunk};
  Result<std::uintptr_t> big = vmm.reserve_address(too_much[0] + too_much[1]);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  const Status refused = vmm.map_pieces(*big, too_much);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_EQ(vmm.mapping_count(), 2u) << "the piece mapped before the failure is undone";
  EXPECT_EQ(vmm.held_bytes(), 13 * chunk);
  vmm.free_address(*big, too_much[0] + too_much[1]);

  vmm.unmap(*base, 10 * chunk);
  vmm.unmap(*base + 20 * chunk, 3 * chunk);
  vmm.free_address(*base, 64 * chunk);
  EXPECT_EQ(vmm.held_bytes(), 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaVmmMapping, MisuseIsRefusedBeforeTheDriver) {
  CudaVmmBackend& vmm = *backend_;
  const std::size_t chunk = vmm.chunk_bytes();
  EXPECT_EQ(vmm.reserve_address(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vmm.reserve_address(chunk + 1).status().code(), StatusCode::kInvalidArgument);
  Result<std::uintptr_t> absurd = vmm.reserve_address(std::size_t{1} << 62);
  ASSERT_FALSE(absurd.ok());
  EXPECT_EQ(absurd.status().code(), StatusCode::kResourceExhausted) << absurd.status().ToString();
  std::printf("[   INFO   ] %s\n", absurd.status().ToString().c_str());

  Result<std::uintptr_t> base = vmm.reserve_address(4 * chunk);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  EXPECT_EQ(vmm.map(*base + 1, chunk).code(), StatusCode::kInvalidArgument);              // misaligned
  EXPECT_EQ(vmm.map(*base, chunk + 512).code(), StatusCode::kInvalidArgument);            // partial chunk
  EXPECT_EQ(vmm.map(*base + 2 * chunk, 4 * chunk).code(), StatusCode::kInvalidArgument);  // past the range
  EXPECT_EQ(vmm.map(*base + 64 * chunk, chunk).code(), StatusCode::kInvalidArgument);     // not reserved
  ASSERT_TRUE(vmm.map(*base + chunk, 2 * chunk).ok());
  EXPECT_EQ(vmm.map(*base, 2 * chunk).code(), StatusCode::kInvalidArgument);  // overlaps a mapped chunk
  EXPECT_EQ(vmm.held_bytes(), 2 * chunk);
  vmm.unmap(*base + chunk, chunk);  // part of a mapping: refused (logged), nothing unmapped
  EXPECT_EQ(vmm.held_bytes(), 2 * chunk);
  vmm.unmap(*base + chunk, 2 * chunk);
  EXPECT_EQ(vmm.held_bytes(), 0u);
  vmm.free_address(*base, 4 * chunk);
  EXPECT_EQ(vmm.held_bytes(), 0u);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaVmmMapping, FailedMapLeavesNothingMapped) {
  CudaVmmBackend& vmm = *backend_;
  const std::size_t chunk = vmm.chunk_bytes();
  const DeviceInfo info = vmm.device_info();
  // More than is free: the driver runs out part-way and every chunk mapped before that must be undone.
  const std::size_t bytes = (info.free_bytes / chunk + 64) * chunk;
  Result<std::uintptr_t> base = vmm.reserve_address(bytes);
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const std::uint64_t free_before = DeviceFreeBytes();
  const Status mapped = vmm.map(*base, bytes);
  ASSERT_FALSE(mapped.ok());
  EXPECT_EQ(mapped.code(), StatusCode::kResourceExhausted) << mapped.ToString();
  std::printf("[   INFO   ] %s\n", mapped.ToString().c_str());
  EXPECT_EQ(vmm.held_bytes(), 0u);
  EXPECT_GE(DeviceFreeBytes() + 2 * kMiB, free_before);
  vmm.free_address(*base, bytes);
  ASSERT_TRUE(vmm.map(*base, chunk).code() == StatusCode::kInvalidArgument);  // the range is gone
}

}  // namespace
}  // namespace memcoord
