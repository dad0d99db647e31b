// The HTTP server's worker pool: `threads` workers take requests (each received whole by the RequestGate,
// request_gate.h) from a queue of at most `max_pending`. Beyond that, enqueue runs the task on the caller,
// the gate's thread, which then reads nothing until it is done; the gate soon holds its most connections, its
// Admit blocks the accept loop, and further clients wait in the kernel's listen backlog (or are refused
// there) instead of each taking a file descriptor. An unbounded queue let a flood of idle connections take
// every descriptor the process had, and gRPC, in the same process, stopped accepting for good. Thread safety:
// enqueue from one thread (the gate's); shutdown once, from any thread.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace memcoord::coordinator {

class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(std::size_t threads, std::size_t max_pending);
  ~BoundedTaskQueue() override;
  BoundedTaskQueue(const BoundedTaskQueue&) = delete;
  BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

  void enqueue(std::function<void()> task) override;
  void shutdown() override;

  std::size_t ran_on_caller() const;  // tasks run by enqueue itself (the queue was full)

 private:
  void work();

  const std::size_t max_pending_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // mu_ guards the following.
  std::deque<std::function<void()>> pending_;
  bool stopping_ = false;
  std::size_t ran_on_caller_ = 0;
  std::vector<std::thread> workers_;  // last: they start once the rest exists
};

}  // namespace memcoord::coordinator
