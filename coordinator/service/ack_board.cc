#include "coordinator/service/ack_board.h"

#include <algorithm>

namespace memcoord::coordinator {

void AckBoard::open(std::uint64_t command_id, const std::vector<int>& ranks) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[command_id];
  e.waiting.insert(ranks.begin(), ranks.end());
}

void AckBoard::deliver(std::uint64_t command_id, const RankAck& ack) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(command_id);
    if (it == entries_.end() || it->second.waiting.erase(ack.rank) == 0) return;
    it->second.acks.push_back(ack);
  }
  cv_.notify_all();
}

void AckBoard::rank_gone(int rank) {
  {
    std::lock_guard lock(mu_);
    for (auto& [id, e] : entries_) {
      if (e.waiting.erase(rank) > 0) e.gone.insert(rank);
    }
  }
  cv_.notify_all();
}

AckResult AckBoard::wait(std::uint64_t command_id, Clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [&] {
    auto it = entries_.find(command_id);
    return it == entries_.end() || it->second.waiting.empty();
  });
  AckResult result;
  auto it = entries_.find(command_id);
  if (it == entries_.end()) return result;
  result.acks = std::move(it->second.acks);
  std::sort(result.acks.begin(), result.acks.end(),
            [](const RankAck& a, const RankAck& b) { return a.rank < b.rank; });
  result.missing_ranks.assign(it->second.waiting.begin(), it->second.waiting.end());
  result.missing_ranks.insert(result.missing_ranks.end(), it->second.gone.begin(), it->second.gone.end());
  std::sort(result.missing_ranks.begin(), result.missing_ranks.end());
  entries_.erase(it);
  return result;
}

}  // namespace memcoord::coordinator
