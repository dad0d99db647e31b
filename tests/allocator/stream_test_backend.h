// A VirtualBackend whose streams can be marked busy, and which records the cross-stream waits and
// synchronizations the pool asks for: lets tests check the pool's stream rules without a GPU.
#pragma once

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "allocator/virtual_backend.h"

namespace memcoord::testing {

class StreamTestBackend final : public DeviceBackend {
 public:
  explicit StreamTestBackend(std::uint64_t capacity = 8ULL << 30) : inner_(capacity) {}

  std::size_t chunk_bytes() const override { return inner_.chunk_bytes(); }
  Result<std::uintptr_t> reserve_address(std::size_t bytes) override { return inner_.reserve_address(bytes); }
  void free_address(std::uintptr_t base, std::size_t bytes) noexcept override {
    inner_.free_address(base, bytes);
  }
  Status map(std::uintptr_t a, std::size_t bytes) override { return inner_.map(a, bytes); }
  void unmap(std::uintptr_t a, std::size_t bytes) noexcept override { inner_.unmap(a, bytes); }
  DeviceInfo device_info() override { return inner_.device_info(); }
  std::string_view kind() const override { return "stream-test"; }

  Status wait_for(StreamId waiter, StreamId producer) override {
    std::lock_guard<std::mutex> lock(mu_);
    waits.emplace_back(waiter, producer);
    return Status::Ok();
  }
  bool stream_idle(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    return busy.count(stream) == 0;
  }
  Status synchronize(StreamId stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    synchronized.push_back(stream);
    busy.erase(stream);
    return Status::Ok();
  }

  std::uint64_t used_bytes() const { return inner_.used_bytes(); }

  std::vector<std::pair<StreamId, StreamId>> waits;  // (waiter, producer)
  std::vector<StreamId> synchronized;
  std::set<StreamId> busy;

 private:
  Result<void*> do_allocate(std::size_t bytes) override { return inner_.allocate(bytes); }
  void do_release(void* p, std::size_t bytes) noexcept override { inner_.release(p, bytes); }

  std::mutex mu_;
  VirtualBackend inner_;
};

}  // namespace memcoord::testing
