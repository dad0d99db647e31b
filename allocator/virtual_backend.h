// VirtualBackend: addresses only, no memory. Models a GPU in its default virtual-memory configuration:
// physical memory in chunk_bytes (2 MiB) units mapped into reserved address ranges, with the device's
// capacity as the cap on mapped plus segment bytes. Lets a laptop replay a 141 GB trace and measures exactly
// what the pool would reserve on the device. Never dereference its addresses.
// Thread-safe (atomics and one mutex for the bookkeeping that catches misuse).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "allocator/detail/capacity_counter.h"
#include "allocator/device_backend.h"

namespace memcoord {

class VirtualBackend final : public DeviceBackend {
 public:
  // 143,771 MiB: what the driver reports for an H200.
  static constexpr std::uint64_t kDefaultCapacityBytes = 143771ULL << 20;
  static constexpr std::size_t kChunkBytes = 2 << 20;

  explicit VirtualBackend(std::uint64_t capacity_bytes = kDefaultCapacityBytes);

  std::size_t chunk_bytes() const override { return kChunkBytes; }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override;
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override;
  Status map(std::uintptr_t address, std::size_t bytes) override;
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override;
  DeviceInfo device_info() override;
  std::string_view kind() const override { return "virtual"; }

  std::uint64_t used_bytes() const { return capacity_.used(); }

 private:
  Result<void*> do_allocate(std::size_t bytes) override;
  void do_release(void* ptr, std::size_t bytes) noexcept override;

  detail::CapacityCounter capacity_;
  std::atomic<std::uintptr_t> next_address_;  // addresses are never reused
};

}  // namespace memcoord
