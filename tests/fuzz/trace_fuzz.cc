// Fuzzes the trace parsers from memory (ParseTrace: the memcoord/PyTorch text format and RMM's CSV log,
// detected from the content). Accepted traces must satisfy CheckTrace; rejected ones must say why.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "allocator/trace.h"
#include "tests/fuzz/trace_check.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  memcoord::Result<memcoord::Trace> trace = memcoord::ParseTrace(text, "fuzz");
  if (!trace.ok()) {
    if (trace.status().message().empty()) std::abort();
    return 0;
  }
  memcoord::fuzz::CheckTrace(*trace);
  return 0;
}
