// The key/value rendezvous NCCL ranks meet through, with ranks as threads over both shipped stores.
#include "collectives/nccl_rendezvous.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <thread>
#include <vector>

namespace memcoord {
namespace {

using std::chrono::milliseconds;

void ExchangeAcrossThreads(KeyValueBootstrap& store) {
  constexpr int kRanks = 4;
  std::vector<std::vector<std::string>> gathered(kRanks);
  std::vector<std::string> broadcast(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      auto rendezvous = MakeKeyValueRendezvous(store, "job7/world", r, kRanks);
      auto all = rendezvous->allgather("bus-" + std::to_string(r), milliseconds(5000));
      ASSERT_TRUE(all.ok()) << all.status().ToString();
      gathered[static_cast<std::size_t>(r)] = *all;
      // A second round under the same prefix does not collide with the first.
      auto id = rendezvous->broadcast(r == 2 ? std::string("\0id\xff", 4) : "ignored", 2, milliseconds(5000));
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      broadcast[static_cast<std::size_t>(r)] = *id;
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(gathered[static_cast<std::size_t>(r)],
              (std::vector<std::string>{"bus-0", "bus-1", "bus-2", "bus-3"}));
    EXPECT_EQ(broadcast[static_cast<std::size_t>(r)], std::string("\0id\xff", 4));
  }
}

TEST(KeyValueRendezvous, AllgatherAndBroadcastInProcess) {
  InProcessKeyValueBootstrap store;
  ExchangeAcrossThreads(store);
}

TEST(KeyValueRendezvous, AllgatherAndBroadcastThroughFiles) {
  char pattern[] = "/tmp/memcoord-rdv-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  {
    FileKeyValueBootstrap store(pattern);
    ExchangeAcrossThreads(store);
  }
  std::filesystem::remove_all(pattern);
}

TEST(KeyValueRendezvous, AbsentPeerIsDeadlineExceeded) {
  InProcessKeyValueBootstrap store;
  auto rendezvous = MakeKeyValueRendezvous(store, "lonely", 0, 2);
  auto all = rendezvous->allgather("bus-0", milliseconds(50));
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(all.status().message().find("lonely/0/1"), std::string::npos) << all.status().message();
}

}  // namespace
}  // namespace memcoord
