// A HostBackend that reports a GPU UUID, as a CUDA backend does (DeviceInfo::uuid): lets tests without a GPU
// follow a worker's UUID from its Register to the coordinator's /metrics label and GetCluster. Forwards every
// call to the HostBackend it owns. Thread-safe as HostBackend is.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "allocator/host_backend.h"

namespace memcoord::testing {

class UuidBackend final : public DeviceBackend {
 public:
  UuidBackend(std::string uuid, std::uint64_t capacity_bytes)
      : uuid_(std::move(uuid)), host_(capacity_bytes) {}

  // A WorkerOptions::backend_factory whose every device reports `uuid`.
  static auto Factory(std::string uuid, std::uint64_t capacity_bytes = 1ull << 30) {
    return [uuid = std::move(uuid), capacity_bytes](int) -> Result<std::unique_ptr<DeviceBackend>> {
      return std::unique_ptr<DeviceBackend>(std::make_unique<UuidBackend>(uuid, capacity_bytes));
    };
  }

  std::size_t chunk_bytes() const override { return host_.chunk_bytes(); }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override { return host_.reserve_address(bytes); }
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override {
    host_.free_address(base, bytes);
  }
  Status map(std::uintptr_t address, std::size_t bytes) override { return host_.map(address, bytes); }
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override { host_.unmap(address, bytes); }
  DeviceInfo device_info() override {
    DeviceInfo info = host_.device_info();
    info.uuid = uuid_;
    return info;
  }
  std::string_view kind() const override { return host_.kind(); }

 private:
  Result<void*> do_allocate(std::size_t bytes) override { return host_.allocate(bytes); }
  void do_release(void* ptr, std::size_t bytes) noexcept override { host_.release(ptr, bytes); }

  const std::string uuid_;
  HostBackend host_;
};

}  // namespace memcoord::testing
