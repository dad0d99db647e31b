#include "allocator/trace_recorder.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstdio>

namespace memcoord {

struct TraceRecorder::File {
  bool gzip = false;
  gzFile gz = nullptr;
  std::FILE* plain = nullptr;
  bool failed = false;
  std::string path;
};

TraceRecorder::TraceRecorder() = default;
TraceRecorder::~TraceRecorder() { (void)close(); }

Status TraceRecorder::open(const std::string& path, const std::string& workload) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_) return FailedPrecondition(fmt::format("trace recorder already writing {}", file_->path));
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
  const std::string header = fmt::format("# memcoord workload={}; code addr size stream\n", workload);
  if (file_->gzip) {
    gzputs(file_->gz, header.c_str());
  } else {
    std::fputs(header.c_str(), file_->plain);
  }
  return Status::Ok();
}

void TraceRecorder::write_line(char code, std::uintptr_t address, std::size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  char line[96];
  const int n = std::snprintf(line, sizeof line, "%c %lx %zu %lu\n", code,
                              static_cast<unsigned long>(address), bytes, static_cast<unsigned long>(stream));
  const bool ok = file_->gzip ? gzwrite(file_->gz, line, static_cast<unsigned>(n)) == n
                              : std::fwrite(line, 1, static_cast<std::size_t>(n), file_->plain) ==
                                    static_cast<std::size_t>(n);
  if (!ok) file_->failed = true;
}

void TraceRecorder::record_alloc(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  write_line('a', address, bytes, stream);
}
void TraceRecorder::record_free(std::uintptr_t address, std::size_t bytes, StreamId stream) {
  write_line('f', address, bytes, stream);
}

Status TraceRecorder::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return Status::Ok();
  bool ok = !file_->failed;
  if (file_->gzip) {
    ok = gzclose(file_->gz) == Z_OK && ok;
  } else {
    ok = std::fclose(file_->plain) == 0 && ok;
  }
  const std::string path = file_->path;
  file_.reset();
  if (!ok) return DataLoss(fmt::format("writing trace file '{}' failed", path));
  return Status::Ok();
}

}  // namespace memcoord
