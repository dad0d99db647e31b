// Calls made while a thread exits, from its pthread key destructors (a C program freeing a per-thread block
// there), which glibc runs after the thread's C++ thread_local destructors: the last error must still be
// there to write (it was a std::string, destroyed already: a double free that ended the process), and a
// thread whose first memcoord call comes from such a destructor must give its hazard slot back (its
// thread_local releaser never ran: each such thread lost a slot for good).
#include <gtest/gtest.h>
#include <pthread.h>

#include <string>

#include "worker/capi/runtime.h"
#include "worker/memcoord.h"

namespace {

struct KeyDestructorCall {
  int code = 0;
  std::string last_error;
  bool had_a_slot = false;
};

KeyDestructorCall g_seen;

// Frees the thread's block at exit: first under a pool name it does not belong to (a failure, which stores
// the thread's last error), then as it should be freed.
void FreeAtExit(void* block) {
  g_seen.code = memcoord_free("no-such-pool", block);
  g_seen.last_error = memcoord_last_error();
  g_seen.had_a_slot = memcoord::capi::guard::t_hazard != nullptr;
  EXPECT_EQ(memcoord_free(nullptr, block), 0) << memcoord_last_error();
}

class CAbiThreadExit : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
    ASSERT_EQ(::pthread_key_create(&key_, &FreeAtExit), 0);
  }
  void TearDown() override {
    ::pthread_key_delete(key_);
    EXPECT_EQ(memcoord_shutdown(), 0);
  }

  // A thread that stores `block` under the key, after a failing call of its own when `fail_first`.
  void RunThread(void* block, bool fail_first) {
    struct Args {
      pthread_key_t key;
      void* block;
      bool fail_first;
    } args{key_, block, fail_first};
    pthread_t thread;
    ASSERT_EQ(::pthread_create(
                  &thread, nullptr,
                  [](void* raw) -> void* {
                    auto* a = static_cast<Args*>(raw);
                    if (a->fail_first) {
                      EXPECT_NE(memcoord_free(nullptr, nullptr), 0);  // a heap-sized error text
                    }
                    ::pthread_setspecific(a->key, a->block);
                    return nullptr;
                  },
                  &args),
              0);
    ASSERT_EQ(::pthread_join(thread, nullptr), 0);
  }

  pthread_key_t key_{};
};

TEST_F(CAbiThreadExit, AFailedCallInAKeyDestructorReportsItsError) {
  for (int i = 0; i < 3; ++i) {
    void* block = memcoord_alloc(nullptr, 4096, 0);
    ASSERT_NE(block, nullptr) << memcoord_last_error();
    RunThread(block, /*fail_first=*/true);
    EXPECT_EQ(g_seen.code, MEMCOORD_ERR_NOT_FOUND);
    EXPECT_NE(g_seen.last_error.find("no-such-pool"), std::string::npos) << g_seen.last_error;
  }
}

TEST_F(CAbiThreadExit, AThreadWhoseFirstCallIsInAKeyDestructorGivesItsSlotBack) {
  // More threads than there are slots (1024), each making its first call at exit: had each kept its slot,
  // the last ones would find none (and take the shared overflow path).
  for (int i = 0; i < 1100; ++i) {
    void* block = memcoord_alloc(nullptr, 4096, 0);
    ASSERT_NE(block, nullptr) << memcoord_last_error();
    g_seen = {};
    RunThread(block, /*fail_first=*/false);
    ASSERT_TRUE(g_seen.had_a_slot) << "thread " << i << " found no hazard slot free";
    ASSERT_EQ(g_seen.code, MEMCOORD_ERR_NOT_FOUND);
  }
}

TEST(CAbiLastError, ALongTextIsCutAndSaysSo) {
  // A NULL pool name's error is short; a pool name of 10,000 characters is quoted in the NOT_FOUND text.
  ASSERT_EQ(memcoord_init(), 0) << memcoord_last_error();
  const std::string name(10000, 'p');
  int dummy = 0;
  EXPECT_EQ(memcoord_free(name.c_str(), &dummy), MEMCOORD_ERR_NOT_FOUND);
  const std::string text = memcoord_last_error();
  EXPECT_EQ(text.size(), 4095u);
  EXPECT_TRUE(text.ends_with(" ... (truncated)")) << text.substr(text.size() - 40);
  EXPECT_EQ(memcoord_shutdown(), 0);
}

}  // namespace
