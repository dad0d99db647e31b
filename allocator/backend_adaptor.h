// BackendAdaptor: a DeviceBackend that forwards every call to `upstream`, for backends that change a part
// (LimitAdaptor counts what is mapped and allocated) and keep the rest; written once so that a call added
// to DeviceBackend is forwarded everywhere. Thread-safe as `upstream` is. Ownership: does not own
// `upstream`, which must outlive it.
// map_pieces is the one call not forwarded: DeviceBackend's default maps each piece through this adaptor's
// map(), so an adaptor that changes map() sees every piece. One that only counts bytes (LimitAdaptor)
// overrides map_pieces too, to pass the run down whole.
#pragma once

#include <cstdint>
#include <string_view>

#include "allocator/device_backend.h"

namespace memcoord {

class BackendAdaptor : public DeviceBackend {
 public:
  explicit BackendAdaptor(DeviceBackend& upstream) : upstream_(upstream) {}
  DeviceBackend& upstream() const { return upstream_; }

  bool supports_segments() const override { return upstream_.supports_segments(); }
  std::size_t chunk_bytes() const override { return upstream_.chunk_bytes(); }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override {
    return upstream_.reserve_address(bytes);
  }
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override {
    upstream_.free_address(base, bytes);
  }
  Status map(std::uintptr_t address, std::size_t bytes) override { return upstream_.map(address, bytes); }
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override { upstream_.unmap(address, bytes); }
  Status wait_for(StreamId waiter, StreamId producer) override {
    return upstream_.wait_for(waiter, producer);
  }
  bool stream_idle(StreamId stream) override { return upstream_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return upstream_.synchronize(stream); }
  MarkerId record_marker(StreamId stream) override { return upstream_.record_marker(stream); }
  bool marker_reached(MarkerId marker) override { return upstream_.marker_reached(marker); }
  Status wait_marker(MarkerId marker) override { return upstream_.wait_marker(marker); }
  void release_marker(MarkerId marker) noexcept override { upstream_.release_marker(marker); }
  std::uint64_t bytes_over_budget(std::uint64_t more_bytes) const override {
    return upstream_.bytes_over_budget(more_bytes);
  }
  DeviceInfo device_info() override { return upstream_.device_info(); }
  std::string_view kind() const override { return upstream_.kind(); }

 protected:
  Result<void*> do_allocate(std::size_t bytes) override { return upstream_.allocate(bytes); }
  void do_release(void* ptr, std::size_t bytes) noexcept override { upstream_.release(ptr, bytes); }

 private:
  DeviceBackend& upstream_;
};

}  // namespace memcoord
