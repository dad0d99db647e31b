#include "allocator/cuda/pinned_host_backend.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "allocator/cuda/cuda_device.h"
#include "allocator/cuda/cuda_device_facts.h"
#include "common/cuda_status.h"

namespace memcoord {
namespace {

std::uint64_t PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
             : 0;
}

// MemAvailable (what can be taken without swapping), else the free pages.
std::uint64_t AvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0
             ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size)
             : 0;
}

}  // namespace

Result<std::unique_ptr<PinnedHostBackend>> PinnedHostBackend::Create(int device) {
  MEMCOORD_ASSIGN_OR_RETURN(CudaDeviceFacts facts, ReadCudaDeviceFacts(device));
  (void)facts;  // only the checks matter: pinning needs a working driver and the streams' device
  return std::unique_ptr<PinnedHostBackend>(new PinnedHostBackend(device, PhysicalMemoryBytes()));
}

PinnedHostBackend::PinnedHostBackend(int device, std::uint64_t total_bytes)
    : device_(device), total_bytes_(total_bytes), streams_(device) {}

PinnedHostBackend::~PinnedHostBackend() {
  if (const std::uint64_t held = held_bytes(); held != 0) {
    spdlog::warn("pinned-host backend destroyed with {} bytes still pinned", held);
  }
}

Result<void*> PinnedHostBackend::do_allocate(std::size_t bytes) {
  if (bytes > total_bytes_) {
    return ResourceExhausted(fmt::format(
        "pinned-host backend: cannot pin {} bytes: the machine has {} bytes of RAM", bytes, total_bytes_));
  }
  ScopedCudaDevice on_device(device_);
  MEMCOORD_RETURN_IF_ERROR(on_device.status());
  void* ptr = nullptr;
  const Status status = CudaRuntimeStatus(cudaHostAlloc(&ptr, bytes, cudaHostAllocPortable),
                                          fmt::format("cudaHostAlloc({}, cudaHostAllocPortable)", bytes));
  if (!status.ok()) {
    return status.WithContext(fmt::format(
        "pinned-host backend: pinning {} bytes ({} bytes available): ", bytes, AvailableMemoryBytes()));
  }
  held_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return ptr;
}

void PinnedHostBackend::do_release(void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr) return;
  ScopedCudaDevice on_device(device_);
  const Status status =
      CudaRuntimeStatus(cudaFreeHost(ptr), fmt::format("cudaFreeHost({}, {} bytes)", ptr, bytes));
  if (!status.ok()) {
    spdlog::error("pinned-host backend: {}", status.ToString());
    return;
  }
  held_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

DeviceInfo PinnedHostBackend::device_info() {
  DeviceInfo info;
  info.kind = "pinned-host";
  info.name = "pinned host memory";
  info.device = -1;
  info.total_bytes = total_bytes_;
  info.free_bytes = AvailableMemoryBytes();
  info.device_memory = false;
  return info;
}

}  // namespace memcoord
