// TagAdaptor alone over a FakeResource: a registry of names, live bytes per registered tag, unknown tags
// refused before the upstream sees them, untagged blocks not counted here.
#include "allocator/tag_adaptor.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/allocator/resource_test_util.h"

namespace memcoord {
namespace {

TEST(TagAdaptor, RegistersNamesOnce) {
  testing::FakeResource fake;
  TagAdaptor tags(fake, "pool 'p'");
  EXPECT_EQ(tags.tag_count(), 1u);
  EXPECT_EQ(*tags.tag("untagged"), kUntagged);
  const TagId act = *tags.tag("activations");
  EXPECT_EQ(act, 1);
  EXPECT_EQ(*tags.tag("activations"), act);
  EXPECT_TRUE(tags.known(act));
  EXPECT_FALSE(tags.known(2));
  Result<TagId> empty = tags.tag("");
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  for (std::size_t i = tags.tag_count(); i < kMaxTags; ++i)
    ASSERT_TRUE(tags.tag("t" + std::to_string(i)).ok());
  Result<TagId> over = tags.tag("one-too-many");
  EXPECT_EQ(over.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("pool 'p': more than 64 tags"), std::string::npos)
      << over.status().message();
}

TEST(TagAdaptor, AnUnknownTagNeverReachesTheUpstream) {
  testing::FakeResource fake;
  TagAdaptor tags(fake, "pool 'p'");
  Result<Allocation> a = tags.allocate(4096, kDefaultStream, 7);
  EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("unknown tag id 7"), std::string::npos) << a.status().message();
  EXPECT_EQ(fake.allocate_calls, 0);
}

TEST(TagAdaptor, CountsLiveBytesOfRegisteredTagsOnly) {
  testing::FakeResource fake;
  TagAdaptor tags(fake);
  const TagId act = *tags.tag("activations");
  const TagId opt = *tags.tag("optimizer");
  Allocation a = *tags.allocate(3000, kDefaultStream, act);
  Allocation b = *tags.allocate(1000, kDefaultStream, opt);
  Allocation c = *tags.allocate(1000, kDefaultStream, act);
  Allocation u = *tags.allocate(9000);  // untagged: the caller's to count
  EXPECT_EQ(tags.tagged_bytes(), 3072u + 1024u + 1024u);
  EXPECT_EQ(tags.tagged_blocks(), 3u);
  std::vector<TagUsage> usage = tags.usage(/*untagged_bytes=*/9216, /*untagged_blocks=*/1);
  ASSERT_EQ(usage.size(), 3u);
  EXPECT_EQ(usage[0].tag, "untagged");
  EXPECT_EQ(usage[1].tag, "activations");
  EXPECT_EQ(usage[1].live_bytes, 4096u);
  EXPECT_EQ(usage[1].live_blocks, 2u);
  EXPECT_EQ(usage[2].tag, "optimizer");
  ASSERT_TRUE(tags.deallocate(a.ptr).ok());
  ASSERT_TRUE(tags.deallocate(c.ptr).ok());
  usage = tags.usage(0, 0);
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].tag, "optimizer");
  fake.fail_next_allocations = 1;
  EXPECT_FALSE(tags.allocate(512, kDefaultStream, act).ok());
  EXPECT_EQ(tags.tagged_bytes(), 1024u) << "a failed allocation counted";
  for (void* p : {b.ptr, u.ptr}) ASSERT_TRUE(tags.deallocate(p).ok());
  EXPECT_EQ(tags.tagged_bytes(), 0u);
  EXPECT_TRUE(tags.usage(0, 0).empty());
}

}  // namespace
}  // namespace memcoord
