// Both shipped KeyValueBootstrap implementations pass the same conformance checks.
#include "collectives/key_value_bootstrap.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

namespace memcoord {
namespace {

using std::chrono::milliseconds;

class KeyValueBootstrapTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (std::string(GetParam()) == "file") {
      char pattern[] = "/tmp/memcoord-kv-XXXXXX";
      ASSERT_NE(::mkdtemp(pattern), nullptr);
      directory_ = pattern;
      store_ = std::make_unique<FileKeyValueBootstrap>(directory_);
    } else {
      store_ = std::make_unique<InProcessKeyValueBootstrap>();
    }
  }
  void TearDown() override {
    if (!directory_.empty()) std::filesystem::remove_all(directory_);
  }
  std::string directory_;
  std::unique_ptr<KeyValueBootstrap> store_;
};

TEST_P(KeyValueBootstrapTest, PutThenGet) {
  ASSERT_TRUE(store_->put("nccl/world/id", std::string("\0binary\xff", 8)).ok());
  auto value = store_->get("nccl/world/id", milliseconds(10));
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, std::string("\0binary\xff", 8));
}

TEST_P(KeyValueBootstrapTest, GetWaitsForALaterPut) {
  std::thread writer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_TRUE(store_->put("late", "here").ok());
  });
  auto value = store_->get("late", milliseconds(5000));
  writer.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "here");
}

TEST_P(KeyValueBootstrapTest, MissingKeyTimesOutNamingTheKey) {
  const auto start = std::chrono::steady_clock::now();
  auto value = store_->get("never/written", milliseconds(60));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(60));
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(value.status().message().find("never/written"), std::string::npos);
}

TEST_P(KeyValueBootstrapTest, KeysAreWrittenOnce) {
  ASSERT_TRUE(store_->put("k", "a").ok());
  EXPECT_TRUE(store_->put("k", "a").ok());  // a retried put
  EXPECT_EQ(store_->put("k", "b").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(*store_->get("k", milliseconds(1)), "a");
  EXPECT_EQ(store_->put("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->get("", milliseconds(1)).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(KeyValueBootstrapTest, RacingWritersAgreeOnOneValue) {
  std::vector<std::thread> writers;
  std::atomic<int> accepted{0};
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&, i] {
      if (store_->put("race", "writer" + std::to_string(i)).ok()) ++accepted;
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(accepted.load(), 1);
  auto value = store_->get("race", milliseconds(1));
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->rfind("writer", 0), 0u);
}

INSTANTIATE_TEST_SUITE_P(Stores, KeyValueBootstrapTest, ::testing::Values("in-process", "file"));

}  // namespace
}  // namespace memcoord
