#include "allocator/detail/map_units.h"

#include <algorithm>

namespace memcoord::detail {

std::vector<std::size_t> UnitPieces(std::size_t offset, std::size_t bytes, std::size_t unit,
                                    std::size_t chunk, bool merge_ends) {
  std::vector<std::size_t> pieces;
  if (bytes > kMaxUnitsPerMiss * unit) {
    const std::size_t chunks = bytes / chunk;
    pieces.reserve(kMaxUnitsPerMiss);
    for (std::size_t i = 0; i < kMaxUnitsPerMiss; ++i) {
      pieces.push_back((chunks / kMaxUnitsPerMiss + (i < chunks % kMaxUnitsPerMiss ? 1 : 0)) * chunk);
    }
    return pieces;
  }
  const std::size_t end = offset + bytes;
  for (std::size_t at = offset; at < end;) {
    const std::size_t next = std::min(end, (at / unit + 1) * unit);
    pieces.push_back(next - at);
    at = next;
  }
  if (merge_ends && pieces.size() >= 2 && pieces.back() < unit && pieces[pieces.size() - 2] >= unit) {
    pieces[pieces.size() - 2] += pieces.back();
    pieces.pop_back();
  }
  if (merge_ends && pieces.size() >= 2 && pieces.front() < unit && pieces[1] >= unit) {
    pieces[1] += pieces.front();
    pieces.erase(pieces.begin());
  }
  return pieces;
}

}  // namespace memcoord::detail
