#include "allocator/trace_recorder.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace memcoord {
namespace {
// The writer wakes once this much is buffered (or at close): fewer, larger writes.
constexpr std::size_t kWakeBytes = 64 << 10;
std::atomic<std::uint64_t> g_next_recorder_id{1};
}  // namespace

struct TraceRecorder::File {
  bool gzip = false;
  gzFile gz = nullptr;
  std::FILE* plain = nullptr;
  bool failed = false;
  std::string path;

  void write(const std::string& data) {
    if (data.empty()) return;
    const bool ok =
        gzip ? gzwrite(gz, data.data(), static_cast<unsigned>(data.size())) == static_cast<int>(data.size())
             : std::fwrite(data.data(), 1, data.size(), plain) == data.size();
    if (!ok) failed = true;
  }
  bool finish() { return (gzip ? gzclose(gz) == Z_OK : std::fclose(plain) == 0) && !failed; }
};

TraceRecorder::TraceRecorder() : id_(g_next_recorder_id.fetch_add(1)) {}
TraceRecorder::~TraceRecorder() { (void)close(); }

Status TraceRecorder::open(const std::string& path, const std::string& workload) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_) return FailedPrecondition(fmt::format("trace recorder already writing {}", file_->path));
  auto f = std::make_unique<File>();
  f->path = path;
  f->gzip = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (f->gzip) {
    f->gz = gzopen(path.c_str(), "wb6");
    if (f->gz == nullptr) return InvalidArgument(fmt::format("cannot write trace file '{}'", path));
  } else {
    f->plain = std::fopen(path.c_str(), "w");
    if (f->plain == nullptr) return InvalidArgument(fmt::format("cannot write trace file '{}'", path));
  }
  file_ = std::move(f);
  buffer_ = fmt::format("# memcoord workload={}; code addr size stream thread\n", workload);
  dropped_ = 0;
  closing_ = false;
  open_ = true;
  writer_ = std::thread([this] { writer_loop(); });
  return Status::Ok();
}

// Threads are numbered in the order they first record here; a thread asks the recorder once and then
// remembers its number (keyed by the recorder's id, never reused, so a new recorder at a freed address starts
// afresh).
std::uint32_t TraceRecorder::thread_number_locked() {
  thread_local std::uint64_t known_recorder = 0;
  thread_local std::uint32_t known_number = 0;
  if (known_recorder == id_) return known_number;
  const std::thread::id me = std::this_thread::get_id();
  std::size_t i = 0;
  while (i < threads_.size() && threads_[i] != me) ++i;
  if (i == threads_.size()) threads_.push_back(me);
  known_recorder = id_;
  known_number = static_cast<std::uint32_t>(std::min<std::size_t>(i, kMaxTraceThreads - 1));
  return known_number;
}

void TraceRecorder::append_line(char code, std::uintptr_t address, std::size_t bytes, StreamId stream) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_ || closing_) return;
    char line[112];
    const int n =
        std::snprintf(line, sizeof line, "%c %lx %zu %lu t%u\n", code, static_cast<unsigned long>(address),
                      bytes, static_cast<unsigned long>(stream), thread_number_locked());
    // After one drop everything is dropped: the file stays a valid prefix (no free without its allocation).
    if (dropped_ > 0 || buffer_.size() + static_cast<std::size_t>(n) > kMaxBufferedBytes) {
      ++dropped_;
      return;
    }
    const bool was_below = buffer_.size() < kWakeBytes;
    buffer_.append(line, static_cast<std::size_t>(n));
    wake = was_below && buffer_.size() >= kWakeBytes;
  }
  if (wake) wake_.notify_one();
}

void TraceRecorder::record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  append_line('a', address, bytes, stream);
}
void TraceRecorder::record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  append_line('f', address, bytes, stream);
}

// Takes the whole buffer under the lock and writes it without the lock, so recording goes on meanwhile.
// One writer and one buffer: lines reach the file in the order they were recorded.
void TraceRecorder::writer_loop() {
  std::string batch;
  while (true) {
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return closing_ || buffer_.size() >= kWakeBytes; });
      batch.swap(buffer_);
      buffer_.clear();
      last = closing_;
    }
    file_->write(batch);
    batch.clear();
    if (last) return;
  }
}

Status TraceRecorder::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_ || closing_) return Status::Ok();
    closing_ = true;
  }
  wake_.notify_one();
  writer_.join();  // writes what was buffered before closing_ was set
  const bool ok = file_->finish();
  const std::string path = file_->path;
  std::uint64_t dropped = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    file_.reset();
    open_ = false;
    closing_ = false;
    buffer_.clear();
    dropped = dropped_;
  }
  if (!ok) return DataLoss(fmt::format("writing trace file '{}' failed", path));
  if (dropped > 0) {
    return DataLoss(
        fmt::format("trace file '{}' is incomplete: {} events dropped because writing fell more "
                    "than {} bytes behind recording",
                    path, dropped, kMaxBufferedBytes));
  }
  return Status::Ok();
}

}  // namespace memcoord
