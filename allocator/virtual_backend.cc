#include "allocator/virtual_backend.h"

#include <fmt/format.h>

#include "common/bytes.h"

namespace memcoord {
namespace {
constexpr std::uintptr_t kFirstAddress = 0x7f0000000000ULL;
std::uintptr_t RoundUp(std::uintptr_t n, std::uintptr_t to) { return (n + to - 1) / to * to; }
}  // namespace

VirtualBackend::VirtualBackend(std::uint64_t capacity_bytes)
    : capacity_(capacity_bytes), next_address_(kFirstAddress) {}

Result<void*> VirtualBackend::do_allocate(std::size_t bytes) {
  MEMCOORD_RETURN_IF_ERROR(capacity_.take(bytes, "virtual device"));
  const std::uintptr_t address = next_address_.fetch_add(RoundUp(bytes, kChunkBytes));
  return reinterpret_cast<void*>(address);
}

void VirtualBackend::do_release(void* /*ptr*/, std::size_t bytes) noexcept { capacity_.give(bytes); }

Result<std::uintptr_t> VirtualBackend::reserve_address(std::size_t bytes) {
  if (bytes == 0 || bytes % kChunkBytes != 0) {
    return InvalidArgument(
        fmt::format("virtual device: reserve of {} bytes is not a multiple of 2 MiB", bytes));
  }
  return next_address_.fetch_add(bytes);
}

void VirtualBackend::free_address(std::uintptr_t /*base*/, std::size_t /*bytes*/) noexcept {}

Status VirtualBackend::map(std::uintptr_t address, std::size_t bytes) {
  if (address % kChunkBytes != 0 || bytes % kChunkBytes != 0 || bytes == 0) {
    return InvalidArgument(
        fmt::format("virtual device: map({:#x}, {}) is not chunk-aligned", address, bytes));
  }
  return capacity_.take(bytes, "virtual device");
}

void VirtualBackend::unmap(std::uintptr_t /*address*/, std::size_t bytes) noexcept { capacity_.give(bytes); }

DeviceInfo VirtualBackend::device_info() {
  DeviceInfo info;
  info.kind = "virtual";
  info.name = "virtual (addresses only)";
  info.total_bytes = capacity_.capacity();
  info.free_bytes = capacity_.capacity() - capacity_.used();
  info.device_memory = true;
  return info;
}

}  // namespace memcoord
