#include "coordinator/service/ack_board.h"

#include <algorithm>

namespace memcoord::coordinator {

void AckBoard::open(std::uint64_t command_id, const std::vector<int>& ranks, bool immediate) {
  std::lock_guard lock(mu_);
  Entry& e = entries_[command_id];
  e.waiting.insert(ranks.begin(), ranks.end());
  e.immediate = immediate;
  e.opened_at = Clock::now();
}

void AckBoard::sample_round_trip(const Entry& entry, const RankAck& ack) {
  if (!entry.immediate || ack.received_at <= entry.opened_at) return;
  const double worker_us = ack.duration_ms > 0 ? ack.duration_ms * 1000.0 : 0.0;
  const double total_us =
      std::chrono::duration<double, std::micro>(ack.received_at - entry.opened_at).count();
  const double sample_us = std::max(total_us - worker_us, 0.0);
  RoundTrip& rt = round_trips_[ack.rank];
  rt.last_us = sample_us;
  rt.average_us = rt.average_us == 0 ? sample_us : 0.75 * rt.average_us + 0.25 * sample_us;
}

std::chrono::microseconds AckBoard::round_trip(int rank) const {
  std::lock_guard lock(mu_);
  auto it = round_trips_.find(rank);
  if (it == round_trips_.end()) return std::chrono::microseconds(0);
  return std::chrono::microseconds(
      static_cast<std::int64_t>(std::max(it->second.last_us, it->second.average_us)));
}

void AckBoard::deliver(std::uint64_t command_id, const RankAck& ack) {
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(command_id);
    if (it == entries_.end() || it->second.waiting.erase(ack.rank) == 0) return;
    sample_round_trip(it->second, ack);
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
