// Kernels the GPU tests and benches launch, behind plain C++ declarations (no CUDA types) so g++-compiled
// tests can call them. Each returns the cudaError_t of its launch as an int (0: queued). Streams are
// cudaStream_t values as in memcoord::StreamId. REQUIRES: a CUDA device; pointers device-accessible (device
// or pinned memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memcoord::gpu_test {

// Writes PatternByte(i, seed) into every byte i of [ptr, ptr + bytes).
int LaunchFill(void* ptr, std::size_t bytes, std::uint32_t seed, std::uintptr_t stream);
// Adds to *mismatches (device memory) the number of bytes of [ptr, ptr + bytes) that differ from the pattern.
int LaunchCheck(const void* ptr, std::size_t bytes, std::uint32_t seed, unsigned long long* mismatches,
                std::uintptr_t stream);
// One thread busy-waits `nanoseconds` of GPU time (%globaltimer), keeping `stream` busy that long.
int LaunchSpin(std::uint64_t nanoseconds, std::uintptr_t stream);

}  // namespace memcoord::gpu_test
