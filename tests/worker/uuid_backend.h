// A HostBackend that reports a GPU UUID, as a CUDA backend does (DeviceInfo::uuid): lets tests without a GPU
// follow a worker's UUID from its Register to the coordinator's /metrics label and GetCluster. Forwards every
// call to the HostBackend it owns. Thread-safe as HostBackend is.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "allocator/host_backend.h"
#include "tests/support/forwarding_backend.h"

namespace memcoord::testing {

class UuidBackend final : public ForwardingBackend<HostBackend> {
 public:
  UuidBackend(std::string uuid, std::uint64_t capacity_bytes)
      : ForwardingBackend(capacity_bytes), uuid_(std::move(uuid)) {}

  // A WorkerOptions::backend_factory whose every device reports `uuid`.
  static auto Factory(std::string uuid, std::uint64_t capacity_bytes = 1ull << 30) {
    return [uuid = std::move(uuid), capacity_bytes](int) -> Result<std::unique_ptr<DeviceBackend>> {
      return std::unique_ptr<DeviceBackend>(std::make_unique<UuidBackend>(uuid, capacity_bytes));
    };
  }

  DeviceInfo device_info() override {
    DeviceInfo info = inner().device_info();
    info.uuid = uuid_;
    return info;
  }

 private:
  const std::string uuid_;
};

}  // namespace memcoord::testing
