// A VirtualBackend whose streams can be marked busy, and which records the cross-stream waits and
// synchronizations the pool asks for: lets tests check the pool's stream rules without a GPU.
#pragma once

#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "allocator/virtual_backend.h"
#include "tests/support/forwarding_backend.h"

namespace memcoord::testing {

class StreamTestBackend final : public ForwardingBackend<VirtualBackend> {
 public:
  explicit StreamTestBackend(std::uint64_t capacity = 8ULL << 30) : ForwardingBackend(capacity) {}

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

  std::uint64_t used_bytes() const { return inner().used_bytes(); }

  std::vector<std::pair<StreamId, StreamId>> waits;  // (waiter, producer)
  std::vector<StreamId> synchronized;
  std::set<StreamId> busy;

 private:
  std::mutex mu_;
};

}  // namespace memcoord::testing
