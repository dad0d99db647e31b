// TraceRecorder: writes a pool's allocation trace in the format of the shared traces (one event a line,
// `a ADDR SIZE STREAM tTHREAD` for an allocation, `f ADDR SIZE STREAM tTHREAD` for a free, addresses in hex),
// gzip-compressed when the path ends in ".gz". `memcoord replay` reads what it writes. THREAD numbers the
// calling threads in the order they first record (t0, t1, ...; past the 64th, threads share t63), so a replay
// can make the same calls from as many threads.
//
// Recording never does I/O on the caller's thread: record_alloc/record_free format the line into an
// in-memory buffer (the pool calls them under its mutex, so they must stay cheap), and a writer thread the
// recorder owns compresses and writes the buffer outside any lock the pool holds. A slow or stalled file
// therefore never blocks an allocation. If the writer falls behind by more than kMaxBufferedBytes, that event
// and every later one are dropped and close() reports how many: the file is then a valid prefix of the trace.
// Thread safety: every method may be called from any thread. Failure: open() reports an unwritable path; a
// write error or dropped events are reported by close().
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "allocator/device_backend.h"
#include "allocator/trace.h"
#include "allocator/trace_sink.h"
#include "common/status.h"

namespace memcoord {

class TraceRecorder final : public TraceSink {
 public:
  // Events buffered while the writer is busy before new ones are dropped.
  static constexpr std::size_t kMaxBufferedBytes = 256ULL << 20;

  TraceRecorder();
  ~TraceRecorder();  // closes the file
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  Status open(const std::string& path, const std::string& workload = "memcoord");
  void record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) override;
  void record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) override;
  // Writes everything buffered so far, waits for the writer to finish, and closes the file.
  Status close();

 private:
  struct File;
  void append_line(char code, std::uintptr_t address, std::size_t bytes, StreamId stream);
  std::uint32_t thread_number_locked();  // REQUIRES: mu_ held
  void writer_loop();

  std::mutex mu_;  // guards the fields below; never held during I/O
  std::condition_variable wake_;
  std::string buffer_;         // formatted lines not yet handed to the writer
  std::uint64_t dropped_ = 0;  // events not recorded because the writer fell too far behind
  bool open_ = false;
  bool closing_ = false;
  std::unique_ptr<File> file_;  // touched by the writer thread only while it runs
  const std::uint64_t id_;      // unique in the process, never reused (threads remember their number by it)
  std::vector<std::thread::id> threads_;  // guarded by mu_: index = the number a thread records as
  std::thread writer_;
};

}  // namespace memcoord
