// KeyValueBootstrap: a tiny rendezvous store through which ranks that share no MPI exchange start-up facts
// (the NCCL unique id, each rank's GPU bus id). The coordinator will provide one over gRPC; this header also
// ships two for tests and single-host runs:
//   InProcessKeyValueBootstrap  one process, several threads (a map and a condition variable);
//   FileKeyValueBootstrap       processes on one host (or a shared file system): one file per key in a
//                               directory, written to a temporary name and renamed, so a reader never sees
//                               half a value.
// Keys are written once: put() of an existing key with a different value is ALREADY_EXISTS (the same value
// again is OK, so a retried put is harmless). get() waits for the key up to `timeout`.
//
// Thread safety: every method of every implementation is thread-safe. Ownership: plain values in and out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include "common/result.h"

namespace memcoord {

class KeyValueBootstrap {
 public:
  KeyValueBootstrap() = default;
  KeyValueBootstrap(const KeyValueBootstrap&) = delete;
  KeyValueBootstrap& operator=(const KeyValueBootstrap&) = delete;
  virtual ~KeyValueBootstrap() = default;

  // Errors: INVALID_ARGUMENT for an empty key; ALREADY_EXISTS for a different value under the key;
  // UNAVAILABLE when the store cannot be written.
  virtual Status put(std::string_view key, std::string_view value) = 0;
  // Errors: DEADLINE_EXCEEDED naming the key when it does not appear within `timeout`.
  virtual Result<std::string> get(std::string_view key, std::chrono::milliseconds timeout) = 0;
};

class InProcessKeyValueBootstrap final : public KeyValueBootstrap {
 public:
  Status put(std::string_view key, std::string_view value) override;
  Result<std::string> get(std::string_view key, std::chrono::milliseconds timeout) override;

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, std::string, std::less<>> values_;  // guarded by mu_
};

class FileKeyValueBootstrap final : public KeyValueBootstrap {
 public:
  // `directory` must exist and be writable by every rank; keys may contain '/', stored as '%2F'.
  explicit FileKeyValueBootstrap(std::string directory);
  Status put(std::string_view key, std::string_view value) override;
  Result<std::string> get(std::string_view key, std::chrono::milliseconds timeout) override;

 private:
  std::string PathOf(std::string_view key) const;
  std::string directory_;
};

}  // namespace memcoord
