// Fuzzes ReadTrace on a file holding the input: the gzip path (zlib, truncated or corrupt streams) as well
// as plain text read through it. Accepted traces must satisfy CheckTrace; rejected ones must say why.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "allocator/trace.h"
#include "tests/fuzz/trace_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = "/tmp/memcoord_trace_file_fuzz." + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  memcoord::Result<memcoord::Trace> trace = memcoord::ReadTrace(path);
  std::remove(path.c_str());
  if (!trace.ok()) {
    if (trace.status().message().empty()) std::abort();
    return 0;
  }
  memcoord::fuzz::CheckTrace(*trace);
  return 0;
}
