#include "allocator/device_backend.h"

#include <fmt/format.h>

namespace memcoord {

Result<void*> DeviceBackend::allocate(std::size_t bytes) {
  if (bytes == 0) return InvalidArgument(fmt::format("{} backend: allocation of 0 bytes", kind()));
  if (!supports_segments()) {
    return Unimplemented(fmt::format("{} backend allocates by mapping only; use map()", kind()));
  }
  return do_allocate(bytes);
}

Result<std::uintptr_t> DeviceBackend::reserve_address(std::size_t /*bytes*/) {
  return Unimplemented(fmt::format("{} backend does not support address mapping", kind()));
}
void DeviceBackend::free_address(std::uintptr_t /*base*/, std::size_t /*bytes*/) noexcept {}
Status DeviceBackend::map(std::uintptr_t /*address*/, std::size_t /*bytes*/) {
  return Unimplemented(fmt::format("{} backend does not support address mapping", kind()));
}
Status DeviceBackend::map_pieces(std::uintptr_t address, std::span<const std::size_t> pieces) {
  std::uintptr_t at = address;
  for (const std::size_t piece : pieces) {
    const Status status = map(at, piece);
    if (!status.ok()) {
      if (at > address) unmap(address, at - address);
      return status;
    }
    at += piece;
  }
  return Status::Ok();
}
void DeviceBackend::unmap(std::uintptr_t /*address*/, std::size_t /*bytes*/) noexcept {}
Status DeviceBackend::wait_for(StreamId /*waiter*/, StreamId /*producer*/) { return Status::Ok(); }
bool DeviceBackend::stream_idle(StreamId /*stream*/) { return true; }
Status DeviceBackend::synchronize(StreamId /*stream*/) { return Status::Ok(); }
MarkerId DeviceBackend::record_marker(StreamId /*stream*/) { return kNoMarker; }
bool DeviceBackend::marker_reached(MarkerId /*marker*/) { return true; }
Status DeviceBackend::wait_marker(MarkerId /*marker*/) { return Status::Ok(); }
void DeviceBackend::release_marker(MarkerId /*marker*/) noexcept {}

}  // namespace memcoord
