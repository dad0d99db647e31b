// SerialRunner: runs tasks one at a time, in the order given, on a thread of its own (started with the first
// task), so that the thread posting them never waits for one. The worker runs the coordinator's `now`
// commands on one: the session's reader thread, which delivers them, must never block in a trim (a trim may
// wait for a stream, a stream stuck in a collective on a dead peer never finishes, and the reader must stay
// free to deliver the Abort that ends it). The coordinator's quota broker runs its transactions on one.
//
// Thread safety: post() and stop() may be called from any thread. stop() drops tasks not yet begun, waits
// for the one running (it may block as long as that task does) and refuses later posts; it is idempotent.
// A task must not call stop() on its own runner.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace memcoord {

class SerialRunner {
 public:
  // `name` says whose tasks these are in log lines ("worker: immediate command").
  explicit SerialRunner(std::string name) : name_(std::move(name)) {}
  ~SerialRunner() { stop(); }
  SerialRunner(const SerialRunner&) = delete;
  SerialRunner& operator=(const SerialRunner&) = delete;

  // Queues `task`; false (and nothing queued) after stop(), or when no thread could be started.
  bool post(std::function<void()> task);
  // See above.
  void stop();

 private:
  void loop();

  const std::string name_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;                       // started by the first post(), under mu_
};

}  // namespace memcoord
