// KvStore: the coordinator's bootstrap key/value store (Put/Get), where ranks exchange what they need to
// start (a communicator id, addresses). Get may wait for a key to appear, up to a bound, and ends early
// when the store shuts down or the caller's call is cancelled.
//
// Contract: keys have 1 to kMaxKeyBytes bytes, values at most kMaxValueBytes, waits at most kMaxWaitMs;
// anything else is INVALID_ARGUMENT naming the limit. Keys are write-once (the bootstrap contract, as in
// collectives/key_value_bootstrap.h): a Put of an existing key with a different value is ALREADY_EXISTS
// naming the key and changes nothing; the same value again is OK (a retried Put is harmless).
// Thread safety: every method is thread-safe; get() blocks only its caller.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "common/result.h"

namespace memcoord::coordinator {

class KvStore {
 public:
  static constexpr std::size_t kMaxKeyBytes = 1024;
  static constexpr std::size_t kMaxValueBytes = 1 << 20;
  static constexpr std::uint32_t kMaxWaitMs = 600000;

  Status put(const std::string& key, const std::string& value);
  // The value of `key`, waiting up to `wait_ms` for it. NOT_FOUND when absent and wait_ms is 0,
  // DEADLINE_EXCEEDED when it did not appear in time (or the wait ended: shutdown, `cancelled()`).
  // `cancelled` is polled at least every 100 ms while waiting.
  Result<std::string> get(const std::string& key, std::uint32_t wait_ms,
                          const std::function<bool()>& cancelled);
  // Ends every wait now; later waits return at once. Idempotent.
  void shutdown();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  // mu_ guards the following.
  std::map<std::string, std::string> values_;
  bool shut_down_ = false;
};

}  // namespace memcoord::coordinator
