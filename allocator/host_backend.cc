#include "allocator/host_backend.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/bytes.h"

namespace memcoord {
namespace {

std::uint64_t HalfOfPhysicalMemory() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 8 * kGiB;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size) / 2;
}

std::size_t RoundUp(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

HostBackend::HostBackend(std::uint64_t capacity_bytes)
    : capacity_(capacity_bytes != 0 ? capacity_bytes : HalfOfPhysicalMemory()) {}

Result<void*> HostBackend::do_allocate(std::size_t bytes) {
  const std::size_t size = RoundUp(bytes, 4096);
  MEMCOORD_RETURN_IF_ERROR(capacity_.take(size, "host device"));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    capacity_.give(size);
    return ResourceExhausted(
        fmt::format("host device: mmap of {} failed: {}", FormatBytes(size), std::strerror(errno)));
  }
  return p;
}

void HostBackend::do_release(void* ptr, std::size_t bytes) noexcept {
  const std::size_t size = RoundUp(bytes, 4096);
  if (munmap(ptr, size) != 0) spdlog::error("host device: munmap failed: {}", std::strerror(errno));
  capacity_.give(size);
}

Result<std::uintptr_t> HostBackend::reserve_address(std::size_t bytes) {
  if (bytes == 0 || bytes % kChunkBytes != 0) {
    return InvalidArgument(fmt::format("host device: reserve of {} bytes is not a multiple of 2 MiB", bytes));
  }
  // Over-reserve by one chunk so the range can start on a chunk boundary, then trim the ends.
  const std::size_t span = bytes + kChunkBytes;
  void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhausted(fmt::format("host device: reserving {} of address space failed: {}",
                                         FormatBytes(bytes), std::strerror(errno)));
  }
  const auto raw = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t base = RoundUp(raw, kChunkBytes);
  if (base > raw) munmap(p, base - raw);
  const std::uintptr_t tail = base + bytes;
  if (raw + span > tail) munmap(reinterpret_cast<void*>(tail), raw + span - tail);
  return base;
}

void HostBackend::free_address(std::uintptr_t base, std::size_t bytes) noexcept {
  if (munmap(reinterpret_cast<void*>(base), bytes) != 0) {
    spdlog::error("host device: releasing address range failed: {}", std::strerror(errno));
  }
}

Status HostBackend::map(std::uintptr_t address, std::size_t bytes) {
  if (address % kChunkBytes != 0 || bytes % kChunkBytes != 0 || bytes == 0) {
    return InvalidArgument(fmt::format("host device: map({:#x}, {}) is not chunk-aligned", address, bytes));
  }
  MEMCOORD_RETURN_IF_ERROR(capacity_.take(bytes, "host device"));
  void* p = mmap(reinterpret_cast<void*>(address), bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) {
    capacity_.give(bytes);
    return ResourceExhausted(
        fmt::format("host device: mapping {} failed: {}", FormatBytes(bytes), std::strerror(errno)));
  }
  return Status::Ok();
}

void HostBackend::unmap(std::uintptr_t address, std::size_t bytes) noexcept {
  // Replacing the pages with a fresh PROT_NONE reservation returns them to the OS and keeps the range
  // reserved.
  void* p = mmap(reinterpret_cast<void*>(address), bytes, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) spdlog::error("host device: unmapping failed: {}", std::strerror(errno));
  capacity_.give(bytes);
}

DeviceInfo HostBackend::device_info() {
  DeviceInfo info;
  info.kind = "host";
  info.name = "host (simulated GPU)";
  info.total_bytes = capacity_.capacity();
  info.free_bytes = capacity_.capacity() - capacity_.used();
  info.device_memory = false;
  return info;
}

}  // namespace memcoord
