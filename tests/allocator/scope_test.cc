#include <gtest/gtest.h>

#include "allocator/caching_pool.h"
#include "allocator/memory_scope.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

TEST(MemoryScope, ReportsWhatTheScopeLeftAndTrims) {
  VirtualBackend backend(8 * kGiB);
  CachingPool pool(backend);
  void* before = *pool.allocate(kMiB);
  ScopeReport seen;
  void* leaked = nullptr;
  {
    MemoryScope scope(
        pool, {.name = "eval", .trim_on_exit = true, .on_exit = [&](const ScopeReport& r) { seen = r; }});
    void* temp = *pool.allocate(256 * kMiB);
    leaked = *pool.allocate(3 * kMiB);
    ASSERT_TRUE(pool.deallocate(temp).ok());
  }
  EXPECT_EQ(seen.name, "eval");
  EXPECT_EQ(seen.left_allocated_bytes, static_cast<std::int64_t>(3 * kMiB));
  // The 256 MiB miss mapped on to its 20 MiB unit's end (grow_to_unit_end), and the leaked 3 MiB block sits
  // in that slack: its unit stays, with the small arena's chunk.
  EXPECT_GE(seen.trimmed_bytes, 240 * kMiB);
  EXPECT_LE(seen.reserved_on_exit_bytes, 20 * kMiB + 2 * kMiB);
  ASSERT_TRUE(pool.deallocate(leaked).ok());

  MemoryScope clean(pool, {.name = "clean", .on_exit = [](const ScopeReport&) {}});
  void* p = *pool.allocate(kMiB);
  ASSERT_TRUE(pool.deallocate(p).ok());
  const ScopeReport& r = clean.close();
  EXPECT_EQ(r.left_allocated_bytes, 0);
  EXPECT_EQ(r.trimmed_bytes, 0u);
  EXPECT_EQ(&clean.close(), &r);  // closing twice returns the same report
  ASSERT_TRUE(pool.deallocate(before).ok());
}

}  // namespace
}  // namespace memcoord
