// ForwardingBackend<Inner>: a DeviceBackend that forwards every call to an `Inner` backend it owns (a
// VirtualBackend, a HostBackend), for test backends that change one part (streams, the facts they report,
// checks on map/unmap) and keep the rest. Thread-safe as `Inner` is.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

#include "allocator/device_backend.h"

namespace memcoord::testing {

template <typename Inner>
class ForwardingBackend : public DeviceBackend {
 public:
  template <typename... Args>
  explicit ForwardingBackend(Args&&... args) : inner_(std::forward<Args>(args)...) {}

  std::size_t chunk_bytes() const override { return inner_.chunk_bytes(); }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override { return inner_.reserve_address(bytes); }
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override {
    inner_.free_address(base, bytes);
  }
  Status map(std::uintptr_t address, std::size_t bytes) override { return inner_.map(address, bytes); }
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override { inner_.unmap(address, bytes); }
  Status wait_for(StreamId waiter, StreamId producer) override { return inner_.wait_for(waiter, producer); }
  bool stream_idle(StreamId stream) override { return inner_.stream_idle(stream); }
  Status synchronize(StreamId stream) override { return inner_.synchronize(stream); }
  MarkerId record_marker(StreamId stream) override { return inner_.record_marker(stream); }
  bool marker_reached(MarkerId marker) override { return inner_.marker_reached(marker); }
  Status wait_marker(MarkerId marker) override { return inner_.wait_marker(marker); }
  void release_marker(MarkerId marker) noexcept override { inner_.release_marker(marker); }
  DeviceInfo device_info() override { return inner_.device_info(); }
  std::string_view kind() const override { return inner_.kind(); }

 protected:
  Inner& inner() { return inner_; }
  const Inner& inner() const { return inner_; }

 private:
  Result<void*> do_allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void do_release(void* ptr, std::size_t bytes) noexcept override { inner_.release(ptr, bytes); }

  Inner inner_;
};

}  // namespace memcoord::testing
