#include "allocator/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "allocator/cuda/cuda_device.h"
#include "allocator/cuda/cuda_device_facts.h"
#include "common/cuda_status.h"

namespace memcoord {

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(int device) {
  MEMCOORD_ASSIGN_OR_RETURN(CudaDeviceFacts facts, ReadCudaDeviceFacts(device));
  return std::unique_ptr<CudaBackend>(new CudaBackend(device, std::move(facts)));
}

CudaBackend::CudaBackend(int device, CudaDeviceFacts facts)
    : device_(device), facts_(std::move(facts)), streams_(device) {}

CudaBackend::~CudaBackend() {
  if (const std::uint64_t held = held_bytes(); held != 0) {
    spdlog::warn("cuda backend (device {}) destroyed with {} bytes of segments still held", device_, held);
  }
}

Result<void*> CudaBackend::do_allocate(std::size_t bytes) {
  if (bytes > facts_.total_bytes) {
    return ResourceExhausted(
        fmt::format("cuda backend: cannot allocate {} bytes on device {} ({}): the device has "
                    "{} bytes in all",
                    bytes, device_, facts_.name, facts_.total_bytes));
  }
  ScopedCudaDevice on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  void* ptr = nullptr;
  const Status status = CudaRuntimeStatus(cudaMalloc(&ptr, bytes), fmt::format("cudaMalloc({})", bytes));
  if (!status.ok()) {
    const std::uint64_t free_bytes = ReadCudaDeviceInfo("cuda", device_, facts_).free_bytes;
    return status.WithContext(fmt::format(
        "cuda backend: allocating {} bytes on device {} ({} bytes free): ", bytes, device_, free_bytes));
  }
  held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return ptr;
}

void CudaBackend::do_release(void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr) return;
  ScopedCudaDevice on_device(device_);
  const Status status = CudaRuntimeStatus(cudaFree(ptr), fmt::format("cudaFree({}, {} bytes)", ptr, bytes));
  if (!status.ok()) {
    spdlog::error("cuda backend (device {}): {}", device_, status.ToString());
    return;
  }
  held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

DeviceInfo CudaBackend::device_info() { return ReadCudaDeviceInfo("cuda", device_, facts_); }

}  // namespace memcoord
