// TraceRecorder: writes a pool's allocation trace in the format of the shared traces (one event a line,
// `a ADDR SIZE STREAM` for an allocation, `f ADDR SIZE STREAM` for a free, addresses in hex), gzip-compressed
// when the path ends in ".gz". `memcoord replay` reads what it writes.
// Thread safety: calls are serialized internally. Failure: open() reports an unwritable path; a later write
// error is reported by close().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "allocator/device_backend.h"
#include "common/status.h"

namespace memcoord {

class TraceRecorder {
 public:
  TraceRecorder();
  ~TraceRecorder();  // closes the file
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  Status open(const std::string& path, const std::string& workload = "memcoord");
  void record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream);
  void record_free(std::uintptr_t address, std::size_t bytes, StreamId stream);
  Status close();

 private:
  void write_line(char code, std::uintptr_t address, std::size_t bytes, StreamId stream);

  std::mutex mu_;
  struct File;
  std::unique_ptr<File> file_;  // guarded by mu_
};

}  // namespace memcoord
