// TraceHistory: the most recent allocations and frees of one or more pools, kept in memory (a ring of at
// most `capacity` events, the oldest overwritten first) with their wall-clock time, for snapshots: what
// PyTorch's torch.cuda.memory._record_memory_history keeps and memory_viz draws as the allocation trace.
// No stack frames are kept. Several pools (all of one device) may write into one history; events are in the
// order the pools' calls reached it.
// Thread safety: every method may be called from any thread (one mutex; a record is a copy into the ring).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "allocator/trace_sink.h"

namespace memcoord {

class TraceHistory final : public TraceSink {
 public:
  struct Event {
    bool alloc = true;  // false: a free
    std::uintptr_t address = 0;
    std::size_t bytes = 0;
    StreamId stream = 0;
    std::int64_t time_us = 0;  // microseconds since the Unix epoch
  };

  // REQUIRES: capacity >= 1.
  explicit TraceHistory(std::size_t capacity);

  void record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) override;
  void record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) override;

  // The kept events, oldest first.
  std::vector<Event> events() const;
  // Events overwritten because the ring was full, since the last clear.
  std::uint64_t overwritten() const;
  std::size_t capacity() const;
  // Forgets every event and takes a new capacity (>= 1).
  void reset(std::size_t capacity);

 private:
  void record(bool alloc, std::uintptr_t address, std::size_t bytes, StreamId stream);

  mutable std::mutex mu_;
  // mu_ guards the following.
  std::vector<Event> ring_;  // grows up to capacity_, then wraps at next_
  std::size_t capacity_;
  std::size_t next_ = 0;  // where the next event goes once the ring is full
  std::uint64_t overwritten_ = 0;
};

}  // namespace memcoord
