#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "worker/memcoord.h"

namespace {

TEST(CAbi, InitAllocateStepAndShutdown) {
  setenv("MEMCOORD_BACKEND", "host", 1);
  unsetenv("MEMCOORD_COORDINATOR");
  EXPECT_EQ(memcoord_step(), -1);
  EXPECT_EQ(memcoord_step_end(), 9);  // FAILED_PRECONDITION before init
  EXPECT_NE(std::string(memcoord_last_error()).find("memcoord_init"), std::string::npos);
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  ASSERT_EQ(memcoord_init(), 0);  // idempotent
  void* a = memcoord_alloc(nullptr, 1 << 20, 0);
  ASSERT_NE(a, nullptr) << memcoord_last_error();
  void* b = memcoord_alloc("kv", 4096, 0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(memcoord_free("kv", a), 5);  // NOT_FOUND: a belongs to "default"
  EXPECT_NE(std::string(memcoord_last_error()).find("NOT_FOUND"), std::string::npos);
  EXPECT_EQ(memcoord_free(nullptr, a), 0);
  EXPECT_EQ(memcoord_free("kv", b), 0);
  EXPECT_EQ(memcoord_alloc(nullptr, 0, 0), nullptr);  // INVALID_ARGUMENT, no crash
  EXPECT_EQ(memcoord_step_begin(), 0);
  EXPECT_EQ(memcoord_step_end(), 0);
  EXPECT_EQ(memcoord_step(), 1);
  void* t = memcoord_torch_malloc(256, 0, nullptr);
  ASSERT_NE(t, nullptr);
  memcoord_torch_free(t, 256, 0, nullptr);
  EXPECT_EQ(memcoord_shutdown(), 0);
  EXPECT_EQ(memcoord_step(), -1);
}

}  // namespace
