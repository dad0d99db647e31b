// Test helpers for MemoryResource layers: FakeResource, a simple upstream that hands out addresses without
// memory and can be told to fail, and ExpectConformingResource, the checks every resource must pass
// (instantiated over each adaptor in resource_conformance_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "allocator/memory_resource.h"
#include "common/bytes.h"

namespace memcoord::testing {

// Not thread-safe on purpose: ThreadSafeAdaptor's test relies on plain counters.
class FakeResource final : public MemoryResource {
 public:
  std::map<void*, Allocation> live;
  int allocate_calls = 0;
  int deallocate_calls = 0;
  int record_stream_calls = 0;
  int trim_calls = 0;
  int fail_next_allocations = 0;  // that many allocations fail with `failure` (after being counted)
  Status failure = ResourceExhausted("fake: out of memory");

 private:
  bool do_allocate(std::size_t bytes, StreamId stream, TagId tag, Allocation& out, Status& error) override {
    ++allocate_calls;
    if (bytes == 0) {
      error = InvalidArgument("fake: allocation of 0 bytes");
      return false;
    }
    if (fail_next_allocations > 0) {
      --fail_next_allocations;
      error = failure;
      return false;
    }
    const std::size_t size = (bytes + 511) & ~std::size_t{511};
    void* p = reinterpret_cast<void*>(next_);
    next_ += size;
    out = Allocation{p, size, bytes, stream, tag};
    live[p] = out;
    return true;
  }
  bool do_deallocate(void* ptr, Allocation& freed, Status& error) override {
    ++deallocate_calls;
    if (ptr == nullptr) {
      error = InvalidArgument("fake: free of a null pointer");
      return false;
    }
    auto it = live.find(ptr);
    if (it == live.end()) {
      error = NotFound("fake: not a live block");
      return false;
    }
    freed = it->second;
    live.erase(it);
    return true;
  }
  Status do_record_stream(void* ptr, StreamId) override {
    ++record_stream_calls;
    return live.count(ptr) != 0 ? Status::Ok() : NotFound("fake: not a live block");
  }
  TrimResult do_trim(std::uint64_t) override {
    ++trim_calls;
    return TrimResult{};
  }

  std::uintptr_t next_ = 0x100000;
};

// The contract of memory_resource.h, checked on `r` (which must have room for a few MiB): aligned blocks of
// at least the size asked that never overlap; deallocate returns what allocate gave; bad frees are refused
// and change nothing; record_stream needs a live block.
inline void ExpectConformingResource(MemoryResource& r) {
  std::vector<Allocation> blocks;
  for (std::size_t bytes : {std::size_t{1}, std::size_t{512}, std::size_t{4000}, std::size_t{3 * kMiB + 7}}) {
    Result<Allocation> a = r.allocate(bytes, /*stream=*/0x51, kUntagged);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_NE(a->ptr, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a->ptr) % 512, 0u);
    EXPECT_GE(a->size, bytes);
    EXPECT_EQ(a->requested, bytes);
    EXPECT_EQ(a->stream, 0x51u);
    for (const Allocation& b : blocks) {
      const auto pa = reinterpret_cast<std::uintptr_t>(a->ptr);
      const auto pb = reinterpret_cast<std::uintptr_t>(b.ptr);
      EXPECT_TRUE(pa + a->size <= pb || pb + b.size <= pa) << "live blocks overlap";
    }
    blocks.push_back(*a);
  }
  EXPECT_EQ(r.allocate(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(r.record_stream(blocks[0].ptr, 0x52).ok());
  int local = 0;
  EXPECT_EQ(r.record_stream(&local, 0x52).code(), StatusCode::kNotFound);
  EXPECT_EQ(r.deallocate(&local).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.deallocate(nullptr).status().code(), StatusCode::kInvalidArgument);
  for (const Allocation& b : blocks) {
    Result<Allocation> freed = r.deallocate(b.ptr);
    ASSERT_TRUE(freed.ok()) << freed.status().ToString();
    EXPECT_EQ(freed->ptr, b.ptr);
    EXPECT_EQ(freed->size, b.size);
    EXPECT_EQ(freed->requested, b.requested);
    EXPECT_EQ(freed->stream, b.stream);
    EXPECT_EQ(r.deallocate(b.ptr).status().code(), StatusCode::kNotFound) << "double free accepted";
  }
  (void)r.trim(0);
}

}  // namespace memcoord::testing
