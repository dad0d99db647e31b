// ApplyPoolConf: every key sets its PoolOptions field, untouched fields keep the base's values, and every
// kind of bad conf is INVALID_ARGUMENT naming the entry and what is accepted, with nothing applied.
#include "allocator/pool_conf.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/virtual_backend.h"
#include "common/bytes.h"

namespace memcoord {
namespace {

TEST(PoolConf, EveryKeySetsItsOptionAndTheRestKeepTheBase) {
  PoolOptions base;
  base.name = "mine";
  base.small_block_limit = 4096;
  Result<PoolOptions> o = ApplyPoolConf(
      " large_map_unit:40MiB, thread_cache:512KiB ,thread_cache_block:64KiB,device_reserve:2GiB,"
      "remap:every-miss,growth:segments,free_marker_interval_us:0,thread_cache_fence:off,"
      "thread_cache_idle_misses:0,merge_unit_ends:on,grow_to_unit_end:off,mark_waits:on,address_range:96GiB,"
      "large_grow_step:60MiB",
      base);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->large_map_unit_bytes, 40 * kMiB);
  EXPECT_EQ(o->thread_cache_bytes, 512 * kKiB);
  EXPECT_EQ(o->thread_cache_block_bytes, 64 * kKiB);
  EXPECT_EQ(o->device_reserve_bytes, 2 * kGiB);
  EXPECT_EQ(o->remap, RemapPolicy::kEveryMiss);
  EXPECT_EQ(o->growth, PoolGrowth::kSegments);
  EXPECT_EQ(o->large_free_marker_interval_us, 0u);
  EXPECT_TRUE(base.thread_cache_fence);  // the default
  EXPECT_FALSE(o->thread_cache_fence);
  EXPECT_EQ(base.thread_cache_idle_misses, 16u);  // the default
  EXPECT_EQ(o->thread_cache_idle_misses, 0u);
  EXPECT_FALSE(base.merge_unit_ends);  // the default
  EXPECT_TRUE(o->merge_unit_ends);
  EXPECT_TRUE(base.grow_to_unit_end);  // the default
  EXPECT_FALSE(o->grow_to_unit_end);
  EXPECT_FALSE(base.pack_waits_at_mark);  // the default (off since 2026-12-06)
  EXPECT_TRUE(o->pack_waits_at_mark);
  EXPECT_EQ(base.address_range_bytes, 0u);  // the default: twice the device's memory
  EXPECT_EQ(o->address_range_bytes, 96 * kGiB);
  EXPECT_EQ(base.large_grow_step_bytes, 0u);  // the default: 20 MiB
  EXPECT_EQ(o->large_grow_step_bytes, 60 * kMiB);
  EXPECT_EQ(o->name, "mine");
  EXPECT_EQ(o->small_block_limit, 4096u);
  EXPECT_EQ(o->pack_waits_for_streams, base.pack_waits_for_streams);

  o = ApplyPoolConf("thread_cache:0,remap:under-pressure,growth:mapping", *o);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->thread_cache_bytes, 0u);
  EXPECT_EQ(o->remap, RemapPolicy::kUnderPressure);
  EXPECT_EQ(o->growth, PoolGrowth::kMapping);
  EXPECT_EQ(o->large_map_unit_bytes, 40 * kMiB);  // from the first conf
  o = ApplyPoolConf("free_marker_interval_us:10000000", base);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->large_free_marker_interval_us, 10'000'000u);
  o = ApplyPoolConf("thread_cache_idle_misses:1000000", base);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->thread_cache_idle_misses, 1'000'000u);
  PoolOptions waits_off = base;
  waits_off.pack_waits_at_mark = false;
  o = ApplyPoolConf("mark_waits:on", waits_off);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->pack_waits_at_mark);

  for (const char* nothing : {"", " ", ",", " , ,"}) {
    Result<PoolOptions> same = ApplyPoolConf(nothing, base);
    ASSERT_TRUE(same.ok()) << "'" << nothing << "': " << same.status().ToString();
    EXPECT_EQ(same->thread_cache_bytes, base.thread_cache_bytes);
    EXPECT_EQ(same->large_map_unit_bytes, base.large_map_unit_bytes);
  }
}

// address_range through a pool: the large arena's ranges are that size (the default: twice the device), and
// what one range cannot hold goes into another.
TEST(PoolConf, AddressRangeSizesThePoolsRangesAndMoreRangesHoldTheRest) {
  VirtualBackend device(8 * kGiB);
  auto large_ranges = [](const CachingPool& pool) {
    std::vector<std::size_t> sizes;
    for (const SegmentSnapshot& s : pool.snapshot().segments) {
      if (s.size > 8 * kMiB) sizes.push_back(s.size);  // the small arena's are its own ranges
    }
    return sizes;
  };
  CachingPool by_default(device, PoolOptions{});
  void* one = *by_default.allocate(40 * kMiB);
  EXPECT_EQ(large_ranges(by_default), std::vector<std::size_t>{16 * kGiB});
  ASSERT_TRUE(by_default.deallocate(one).ok());

  Result<PoolOptions> options = ApplyPoolConf("address_range:64MiB", PoolOptions{});
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  CachingPool narrow(device, *options);
  std::vector<void*> blocks;
  for (int i = 0; i < 3; ++i) {
    Result<void*> p = narrow.allocate(40 * kMiB);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    blocks.push_back(*p);
  }
  EXPECT_EQ(large_ranges(narrow), (std::vector<std::size_t>{64 * kMiB, 64 * kMiB, 64 * kMiB}));
  for (void* p : blocks) ASSERT_TRUE(narrow.deallocate(p).ok());
}

TEST(PoolConf, BadConfsNameTheEntryAndWhatIsAccepted) {
  struct Case {
    const char* conf;
    std::vector<std::string> says;  // each must appear in the message
  };
  const std::vector<Case> cases = {
      {"expandable_segments:True",
       {"'expandable_segments:True'", "unknown key 'expandable_segments'", "large_map_unit, thread_cache"}},
      {"thread_cache", {"'thread_cache'", "KEY:VALUE"}},
      {"thread_cache:", {"thread_cache has no value"}},
      {"thread_cache:1MiB,thread_cache:2MiB", {"'thread_cache:2MiB'", "given twice"}},
      {"thread_cache:lots", {"'thread_cache:lots'", "invalid size 'lots'"}},
      {"thread_cache:-1", {"invalid size '-1'"}},
      {"large_map_unit:1TiB", {"'large_map_unit:1TiB'", "larger than the 64.00 GiB accepted"}},
      {"thread_cache:99999999999999999999999", {"invalid size"}},
      {"remap:sometimes", {"remap accepts under-pressure or every-miss"}},
      {"growth:expandable", {"growth accepts auto, mapping or segments"}},
      {"thread_cache:1MiB,bogus:1", {"unknown key 'bogus'", "free_marker_interval_us"}},
      {"free_marker_interval_us:1ms",
       {"'free_marker_interval_us:1ms'", "whole number of microseconds from 0 to 10000000"}},
      {"free_marker_interval_us:-1", {"whole number of microseconds"}},
      {"thread_cache_fence:yes", {"'thread_cache_fence:yes'", "thread_cache_fence accepts on or off"}},
      {"merge_unit_ends:1", {"'merge_unit_ends:1'", "merge_unit_ends accepts on or off"}},
      {"free_marker_interval_us:10000001", {"from 0 to 10000000"}},
      {"free_marker_interval_us:99999999999999999999999999", {"from 0 to 10000000"}},
      {"thread_cache_idle_misses:some",
       {"'thread_cache_idle_misses:some'",
        "thread_cache_idle_misses takes a whole number from 0 to 1000000"}},
      {"thread_cache_idle_misses:-16", {"whole number from 0 to 1000000"}},
      {"thread_cache_idle_misses:16.5", {"whole number from 0 to 1000000"}},
      {"thread_cache_idle_misses:1000001", {"from 0 to 1000000"}},
      {"thread_cache:1MiB,bogus:1", {"thread_cache_idle_misses"}},
      {"bogus:1", {"merge_unit_ends", "grow_to_unit_end", "mark_waits", "address_range", "large_grow_step"}},
      {"large_grow_step:65GiB",
       {"'large_grow_step:65GiB'", "larger than the 64.00 GiB accepted for large_grow_step"}},
      {"large_grow_step:-20MiB", {"'large_grow_step:-20MiB'"}},
      {"address_range:65TiB",
       {"'address_range:65TiB'", "larger than the 64.00 TiB accepted for address_range"}},
      {"address_range:big", {"'address_range:big'", "invalid size 'big'"}},
      {"grow_to_unit_end:true", {"'grow_to_unit_end:true'", "grow_to_unit_end accepts on or off"}},
      {"mark_waits:no", {"'mark_waits:no'", "mark_waits accepts on or off"}},
  };
  PoolOptions base;
  for (const Case& c : cases) {
    Result<PoolOptions> o = ApplyPoolConf(c.conf, base);
    ASSERT_FALSE(o.ok()) << c.conf;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << c.conf;
    for (const std::string& part : c.says) {
      EXPECT_NE(o.status().message().find(part), std::string::npos)
          << c.conf << ": '" << o.status().message() << "' lacks '" << part << "'";
    }
  }
}

}  // namespace
}  // namespace memcoord
