// HostBackend: real host memory with a capacity cap, a simulated GPU for machines without one. Segments come
// from mmap; mapping reserves PROT_NONE address ranges and maps/unmaps anonymous pages in 2 MiB chunks
// (unmapped chunks go back to the OS at once), so the pool behaves exactly as on CUDA virtual memory.
// Streams are host-synchronous: every stream is always idle.
// Thread-safe. Failure: RESOURCE_EXHAUSTED above the cap or when the OS refuses.
#pragma once

#include <atomic>
#include <cstdint>

#include "allocator/detail/capacity_counter.h"
#include "allocator/device_backend.h"

namespace memcoord {

class HostBackend final : public DeviceBackend {
 public:
  static constexpr std::size_t kChunkBytes = 2 << 20;
  // capacity_bytes == 0: half of the machine's physical memory.
  explicit HostBackend(std::uint64_t capacity_bytes = 0);

  std::size_t chunk_bytes() const override { return kChunkBytes; }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override;
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override;
  Status map(std::uintptr_t address, std::size_t bytes) override;
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override;
  DeviceInfo device_info() override;
  std::string_view kind() const override { return "host"; }

  std::uint64_t used_bytes() const { return capacity_.used(); }

 private:
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  detail::CapacityCounter capacity_;
};

}  // namespace memcoord
