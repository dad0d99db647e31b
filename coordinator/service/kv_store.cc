#include "coordinator/service/kv_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

Status KvStore::put(const std::string& key, const std::string& value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return InvalidArgument(fmt::format("key must have 1 to {} bytes, got {}", kMaxKeyBytes, key.size()));
  }
  if (value.size() > kMaxValueBytes) {
    return InvalidArgument(
        fmt::format("value must be at most {} bytes, got {}", kMaxValueBytes, value.size()));
  }
  {
    std::lock_guard lock(mu_);
    auto [it, inserted] = values_.emplace(key, value);
    if (!inserted && it->second != value) {
      return AlreadyExists(fmt::format(
          "key '{}' already holds a different value ({} bytes, this Put {} bytes); bootstrap keys are "
          "write-once (use a new key, e.g. with a round number)",
          key, it->second.size(), value.size()));
    }
    if (!inserted) return Status::Ok();  // the same value again: idempotent
  }
  cv_.notify_all();
  return Status::Ok();
}

Result<std::string> KvStore::get(const std::string& key, std::uint32_t wait_ms,
                                 const std::function<bool()>& cancelled) {
  if (key.empty()) return InvalidArgument("key must not be empty");
  if (wait_ms > kMaxWaitMs) {
    return InvalidArgument(fmt::format("wait_ms must be at most {}, got {}", kMaxWaitMs, wait_ms));
  }
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(wait_ms);
  std::unique_lock lock(mu_);
  while (true) {
    auto it = values_.find(key);
    if (it != values_.end()) return it->second;
    if (Clock::now() >= deadline || shut_down_ || cancelled()) break;
    // Wake at least every 100 ms to notice a cancelled call.
    cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
  }
  if (wait_ms == 0) return NotFound(fmt::format("no value for key '{}'", key));
  return DeadlineExceeded(fmt::format("key '{}' did not appear within {} ms", key, wait_ms));
}

void KvStore::shutdown() {
  {
    std::lock_guard lock(mu_);
    shut_down_ = true;
  }
  cv_.notify_all();
}

}  // namespace memcoord::coordinator
