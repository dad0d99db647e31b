#include "allocator/limit_adaptor.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/bytes.h"

namespace memcoord {

LimitAdaptor::LimitAdaptor(DeviceBackend& upstream, std::uint64_t limit_bytes, std::string owner)
    : BackendAdaptor(upstream), owner_(std::move(owner)), limit_(limit_bytes) {}

std::uint64_t LimitAdaptor::bytes_over_budget(std::uint64_t more_bytes) const {
  const std::uint64_t limit = limit_bytes();
  if (limit == 0) return upstream().bytes_over_budget(more_bytes);
  const std::uint64_t after = used_bytes() + more_bytes;
  const std::uint64_t over = after > limit ? after - limit : 0;
  return std::max(over, upstream().bytes_over_budget(more_bytes));
}

Status LimitAdaptor::take(std::uint64_t bytes, const char* what) {
  std::uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    const std::uint64_t limit = limit_bytes();
    if (limit != 0 && (used + bytes > limit || used + bytes < used)) {
      return ResourceExhausted(fmt::format("the limit of {}: {} {} with {} of {} reserved", owner_, what,
                                           FormatBytes(bytes), FormatBytes(used), FormatBytes(limit)));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return Status::Ok();
}

Status LimitAdaptor::map(std::uintptr_t address, std::size_t bytes) {
  MEMCOORD_RETURN_IF_ERROR(take(bytes, "mapping"));
  Status s = upstream().map(address, bytes);
  if (!s.ok()) give(bytes);
  return s;
}

Status LimitAdaptor::map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces) {
  std::uint64_t bytes = 0;
  for (const std::size_t piece : pieces) bytes += piece;
  MEMCOORD_RETURN_IF_ERROR(take(bytes, "mapping"));
  Status s = upstream().map_pieces(address, pieces);
  if (!s.ok()) give(bytes);
  return s;
}

void LimitAdaptor::unmap(std::uintptr_t address, std::size_t bytes) noexcept {
  upstream().unmap(address, bytes);
  give(bytes);
}

Result<void*> LimitAdaptor::do_allocate(std::size_t bytes) {
  MEMCOORD_RETURN_IF_ERROR(take(bytes, "allocating"));
  Result<void*> p = upstream().allocate(bytes);
  if (!p.ok()) give(bytes);
  return p;
}

void LimitAdaptor::do_release(void* ptr, std::size_t bytes) noexcept {
  upstream().release(ptr, bytes);
  give(bytes);
}

}  // namespace memcoord
