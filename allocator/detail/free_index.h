// FreeIndex: free blocks of one arena and one owner stream, found by size in O(1) time.
// Sizes (multiples of 512) map to bins: exact bins below 8 KiB, then 16 bins per power of two (each bin spans
// at most 1/16 of its size). Two levels of bitmaps find the first non-empty bin at or above a size in a few
// instructions. Within a bin the search is best fit over the first kScanLimit entries (bins are narrow, so
// that is nearly always the whole bin); the next non-empty bin's smallest scanned entry is taken otherwise.
// Among blocks of the same size the lowest address wins, as in PyTorch's caching allocator (its free sets
// order by size, then address): reuse stays at the low end of a segment and frees gather at the high end.
// Not thread-safe (the pool's mutex guards it).
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "allocator/detail/block.h"

namespace memcoord::detail {

class FreeIndex {
 public:
  static constexpr std::size_t kBins = 1024;
  static constexpr std::size_t kScanLimit = 32;

  static std::uint16_t bin_of(std::size_t size) {
    const std::uint64_t units = size >> 9;
    if (units < 16) return static_cast<std::uint16_t>(units);
    const int fl = 63 - std::countl_zero(units);
    const std::uint64_t sl = (units >> (fl - 4)) & 15;
    return static_cast<std::uint16_t>(16 + (fl - 4) * 16 + static_cast<int>(sl));
  }

  void insert(Block* b) {
    const std::uint16_t bin = bin_of(b->size);
    b->bin = bin;
    b->bin_prev = nullptr;
    b->bin_next = heads_[bin];
    if (heads_[bin] != nullptr) heads_[bin]->bin_prev = b;
    heads_[bin] = b;
    bitmap_[bin >> 6] |= 1ULL << (bin & 63);
    summary_ |= 1ULL << (bin >> 6);
    ++count_;
    bytes_ += b->size;
  }

  void remove(Block* b) {
    if (b->bin_prev != nullptr) {
      b->bin_prev->bin_next = b->bin_next;
    } else {
      heads_[b->bin] = b->bin_next;
      if (b->bin_next == nullptr) {
        bitmap_[b->bin >> 6] &= ~(1ULL << (b->bin & 63));
        if (bitmap_[b->bin >> 6] == 0) summary_ &= ~(1ULL << (b->bin >> 6));
      }
    }
    if (b->bin_next != nullptr) b->bin_next->bin_prev = b->bin_prev;
    b->bin_prev = b->bin_next = nullptr;
    --count_;
    bytes_ -= b->size;
  }

  // Smallest-fitting block of at least `size` bytes found as described above (`skip` left out), or nullptr.
  // The scan of the request's own bin is bounded (O(1)): a fitting block past its first entries may be missed
  // there, and the next bin up with blocks answers instead (or nothing, and the pool grows).
  Block* find(std::size_t size, const Block* skip = nullptr) const {
    const std::size_t bin = bin_of(size);
    if (Block* b = best_scanned(bin, size, skip)) return b;
    for (std::size_t next = first_nonempty_from(bin + 1); next < kBins;
         next = first_nonempty_from(next + 1)) {
      if (Block* b = best_scanned(next, 0, skip)) return b;  // every block of a higher bin fits
    }
    return nullptr;
  }

  // The largest free block, exact: walks the whole top bin, so it is for reports (stats), not hot paths.
  std::size_t largest() const {
    if (summary_ == 0) return 0;
    const int word = 63 - std::countl_zero(summary_);
    const int bit = 63 - std::countl_zero(bitmap_[word]);
    std::size_t largest = 0;
    for (Block* b = heads_[word * 64 + bit]; b != nullptr; b = b->bin_next) {
      if (b->size > largest) largest = b->size;
    }
    return largest;
  }

  // Calls f(block) for free blocks from the largest bins down until f returns false. f may remove the block
  // it is given and insert blocks into lower bins.
  template <typename F>
  void for_each_largest_first(F&& f) const {
    for (std::size_t bin = last_nonempty_below(kBins); bin < kBins; bin = last_nonempty_below(bin)) {
      for (Block* b = heads_[bin]; b != nullptr;) {
        Block* next = b->bin_next;  // f may remove b
        if (!f(b)) return;
        b = next;
      }
    }
  }

  std::size_t count() const { return count_; }
  std::uint64_t bytes() const { return bytes_; }
  bool empty() const { return count_ == 0; }

 private:
  std::size_t first_nonempty_from(std::size_t bin) const {
    if (bin >= kBins) return kBins;
    std::size_t word = bin >> 6;
    std::uint64_t bits = bitmap_[word] & (~0ULL << (bin & 63));
    if (bits != 0) return word * 64 + static_cast<std::size_t>(std::countr_zero(bits));
    if (word + 1 >= kWords) return kBins;
    const std::uint64_t words = summary_ & (~0ULL << (word + 1));
    if (words == 0) return kBins;
    word = static_cast<std::size_t>(std::countr_zero(words));
    return word * 64 + static_cast<std::size_t>(std::countr_zero(bitmap_[word]));
  }

  // The highest non-empty bin below `bin`, or kBins when there is none.
  std::size_t last_nonempty_below(std::size_t bin) const {
    if (bin == 0) return kBins;
    std::size_t word = (bin - 1) >> 6;
    const std::size_t bit = (bin - 1) & 63;
    std::uint64_t bits = bitmap_[word] & (bit == 63 ? ~0ULL : ((1ULL << (bit + 1)) - 1));
    if (bits != 0) return word * 64 + static_cast<std::size_t>(63 - std::countl_zero(bits));
    const std::uint64_t words = word == 0 ? 0 : summary_ & ((1ULL << word) - 1);
    if (words == 0) return kBins;
    word = static_cast<std::size_t>(63 - std::countl_zero(words));
    return word * 64 + static_cast<std::size_t>(63 - std::countl_zero(bitmap_[word]));
  }

  // Smaller first, then lower address.
  static bool Better(const Block* a, const Block* b) {
    return a->size < b->size || (a->size == b->size && a->address < b->address);
  }

  // The best of `bin`'s first kScanLimit entries of at least `size` bytes other than `skip`, or nullptr.
  Block* best_scanned(std::size_t bin, std::size_t size, const Block* skip) const {
    Block* best = nullptr;
    std::size_t scanned = 0;
    for (Block* b = heads_[bin]; b != nullptr && scanned < kScanLimit; b = b->bin_next, ++scanned) {
      if (b->size >= size && b != skip && (best == nullptr || Better(b, best))) best = b;
    }
    return best;
  }

  static constexpr std::size_t kWords = kBins / 64;
  std::array<Block*, kBins> heads_{};
  std::array<std::uint64_t, kWords> bitmap_{};
  std::uint64_t summary_ = 0;
  std::size_t count_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace memcoord::detail
