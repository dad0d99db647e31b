#include "coordinator/http/bounded_task_queue.h"

#include <utility>

namespace memcoord::coordinator {

BoundedTaskQueue::BoundedTaskQueue(std::size_t threads, std::size_t max_pending) : max_pending_(max_pending) {
  for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::enqueue(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (pending_.size() < max_pending_) {
      pending_.push_back(std::move(task));
      cv_.notify_one();
      return;
    }
    ++ran_on_caller_;
  }
  task();  // full: the caller (the gate's thread) serves this one itself and reads nothing meanwhile
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
}

std::size_t BoundedTaskQueue::ran_on_caller() const {
  std::lock_guard lock(mu_);
  return ran_on_caller_;
}

// Runs queued tasks until shutdown; what is queued then still runs (each closes its connection).
void BoundedTaskQueue::work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;
      task = std::move(pending_.front());
      pending_.pop_front();
    }
    task();
  }
}

}  // namespace memcoord::coordinator
