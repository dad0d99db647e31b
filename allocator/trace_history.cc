#include "allocator/trace_history.h"

#include <algorithm>
#include <chrono>

namespace memcoord {

TraceHistory::TraceHistory(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

void TraceHistory::record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  record(true, address, bytes, stream);
}

void TraceHistory::record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  record(false, address, bytes, stream);
}

void TraceHistory::record(bool alloc, std::uintptr_t address, std::size_t bytes, StreamId stream) {
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const Event event{alloc, address, bytes, stream, static_cast<std::int64_t>(now)};
  std::lock_guard lock(mu_);
  if (ring_.size() < capacity_) {
    ring_.push_back(event);
    return;
  }
  ring_[next_] = event;
  next_ = (next_ + 1) % capacity_;
  ++overwritten_;
}

std::vector<TraceHistory::Event> TraceHistory::events() const {
  std::lock_guard lock(mu_);
  std::vector<Event> out;
  out.reserve(ring_.size());
  out.insert(out.end(), ring_.begin() + static_cast<std::ptrdiff_t>(next_), ring_.end());
  out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<std::ptrdiff_t>(next_));
  return out;
}

std::uint64_t TraceHistory::overwritten() const {
  std::lock_guard lock(mu_);
  return overwritten_;
}

std::size_t TraceHistory::capacity() const {
  std::lock_guard lock(mu_);
  return capacity_;
}

void TraceHistory::reset(std::size_t capacity) {
  std::lock_guard lock(mu_);
  ring_.clear();
  ring_.shrink_to_fit();
  capacity_ = std::max<std::size_t>(capacity, 1);
  next_ = 0;
  overwritten_ = 0;
}

}  // namespace memcoord
