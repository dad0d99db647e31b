#include "common/serial_runner.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <utility>

namespace memcoord {

bool SerialRunner::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    if (!thread_.joinable()) {
      try {
        thread_ = std::thread([this] { loop(); });
      } catch (const std::exception& e) {
        spdlog::error("{}: no thread to run tasks on: {}", name_, e.what());
        return false;
      }
    }
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void SerialRunner::stop() {
  std::thread thread;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    tasks_.clear();
    thread = std::move(thread_);
  }
  cv_.notify_one();
  if (thread.joinable()) thread.join();
}

void SerialRunner::loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    try {
      task();
    } catch (const std::exception& e) {  // a task's failure ends the task, not the runner or the process
      spdlog::error("{} failed: {}", name_, e.what());
    } catch (...) {
      spdlog::error("{} failed", name_);
    }
  }
}

}  // namespace memcoord
