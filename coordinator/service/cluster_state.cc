#include "coordinator/service/cluster_state.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace memcoord::coordinator {
namespace {

constexpr auto kRateWindow = std::chrono::milliseconds(200);

std::uint64_t MillisBetween(Clock::time_point from, Clock::time_point to) {
  if (to <= from) return 0;
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

}  // namespace

Result<std::chrono::milliseconds> ParseDeadAfter(std::string_view text) {
  const auto bad = [&] {
    return InvalidArgument(fmt::format(
        "--dead-after '{}': expected a duration such as 3s, 500ms, 1.5s or 2m (plain numbers are ms), from "
        "100ms to 1h",
        text));
  };
  std::size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0 || digits > 12) return bad();
  double value = 0;
  try {
    std::size_t used = 0;
    value = std::stod(std::string(text.substr(0, digits)), &used);
    if (used != digits) return bad();
  } catch (const std::exception&) {
    return bad();
  }
  const std::string_view unit = text.substr(digits);
  double ms = 0;
  if (unit.empty() || unit == "ms") {
    ms = value;
  } else if (unit == "s") {
    ms = value * 1000.0;
  } else if (unit == "m") {
    ms = value * 60000.0;
  } else {
    return bad();
  }
  if (!(ms >= 100.0 && ms <= 3600000.0)) return bad();
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

ClusterStateOptions ClusterState::Normalized(ClusterStateOptions options) {
  // Keep liveness usable rather than failing: a worker is never dead before it could miss one report.
  options.silence_factor = std::max(options.silence_factor, 1);
  options.dead_after = std::max(options.dead_after, std::chrono::milliseconds(1));
  return options;
}

ClusterState::ClusterState(ClusterStateOptions options) : options_(Normalized(options)) {}

std::string ClusterState::DeviceKey(const WorkerIdentity& id) {
  return fmt::format("{}:{}:{}", id.host, id.device, id.device < 0 ? id.local_rank : 0);
}

Result<std::uint64_t> ClusterState::register_worker(const WorkerIdentity& id, std::vector<PoolUsage> pools,
                                                    Clock::time_point now) {
  if (id.world_size <= 0 || id.world_size > options_.max_world_size) {
    return InvalidArgument(
        fmt::format("world_size must be in [1, {}], got {}", options_.max_world_size, id.world_size));
  }
  if (id.rank < 0 || id.rank >= id.world_size) {
    return InvalidArgument(fmt::format("rank must be in [0, world_size={}), got {}", id.world_size, id.rank));
  }
  if (id.report_interval_ms < 1 || id.report_interval_ms > 60000) {
    return InvalidArgument(
        fmt::format("report_interval_ms must be in [1, 60000], got {}", id.report_interval_ms));
  }
  std::lock_guard lock(mu_);
  auto it = workers_.find(id.rank);
  if (it != workers_.end() && HoldsRank(it->second.state)) {
    const WorkerIdentity& held = it->second.id;
    return AlreadyExists(fmt::format(
        "rank {} is held by a {} worker (host {}, pid {}, last report {} ms ago); a second worker cannot "
        "claim it until that one is dead (after {} ms without a report)",
        id.rank, StateName(it->second.state), held.host, held.pid,
        MillisBetween(it->second.last_report_at, now), options_.dead_after.count()));
  }
  WorkerRecord record;
  record.id = id;
  if (record.id.group.empty()) record.id.group = "world";
  record.state = WorkerState::kLive;
  record.session_id = next_session_++;
  record.pools = std::move(pools);
  record.registered_at = now;
  record.last_report_at = now;
  const std::uint64_t session = record.session_id;
  workers_[id.rank] = std::move(record);
  session_rank_[session] = id.rank;
  return session;
}

Status ClusterState::report(std::uint64_t session_id, std::int64_t step, std::uint64_t device_free_bytes,
                            std::vector<PoolUsage> pools, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto s = session_rank_.find(session_id);
  if (s == session_rank_.end()) {
    return FailedPrecondition(fmt::format("session {} holds no live rank (register first)", session_id));
  }
  if (step < 0) return InvalidArgument(fmt::format("step must be >= 0, got {}", step));
  WorkerRecord& w = workers_.at(s->second);
  if (w.reports == 0 || step < w.rate_anchor_step) {
    w.rate_anchor_step = step;
    w.rate_anchor_at = now;
  } else if (step > w.rate_anchor_step && now - w.rate_anchor_at >= kRateWindow) {
    // Only a window that ends on a step change measures the rate: with 10 s steps and 100 ms reports, a
    // window without a step is not "0 steps/s" and one with a step is not "5 steps/s"; the anchor stays
    // until the step moves, so the sample spans whole steps.
    const double dt_s = std::chrono::duration<double>(now - w.rate_anchor_at).count();
    const double rate = static_cast<double>(step - w.rate_anchor_step) / dt_s;
    w.steps_per_second = w.steps_per_second == 0.0 ? rate : 0.5 * w.steps_per_second + 0.5 * rate;
    w.rate_anchor_step = step;
    w.rate_anchor_at = now;
  }
  w.state = WorkerState::kLive;  // a suspect that reports again is live again
  w.step = step;
  w.device_free_bytes = device_free_bytes;
  w.pools = std::move(pools);
  w.last_report_at = now;
  ++w.reports;
  return Status::Ok();
}

std::optional<DeadWorker> ClusterState::mark_dead(std::uint64_t session_id, const std::string& reason) {
  std::lock_guard lock(mu_);
  auto s = session_rank_.find(session_id);
  if (s == session_rank_.end()) return std::nullopt;
  WorkerRecord& w = workers_.at(s->second);
  session_rank_.erase(s);
  w.state = WorkerState::kDead;
  w.dead_reason = reason;
  forget_abort_if_empty(w.id.group);
  return DeadWorker{w.id.rank, session_id, w.id.group, reason};
}

std::vector<DeadWorker> ClusterState::sweep(Clock::time_point now, std::vector<int>* new_suspects) {
  std::vector<DeadWorker> dead;
  std::lock_guard lock(mu_);
  for (auto& [rank, w] : workers_) {
    if (!HoldsRank(w.state)) continue;
    const std::uint64_t silent_ms = MillisBetween(w.last_report_at, now);
    // Both factors are bounded (silence_factor is an int, the interval at most 60000 ms): no overflow.
    const std::uint64_t suspect_ms =
        static_cast<std::uint64_t>(options_.silence_factor) * w.id.report_interval_ms;
    const std::uint64_t dead_ms =
        std::max(suspect_ms, static_cast<std::uint64_t>(options_.dead_after.count()));
    if (silent_ms > dead_ms) {
      w.state = WorkerState::kDead;
      w.dead_reason = fmt::format(
          "silent for {} ms (suspect after {} x report interval {} ms, dead after {} ms without a report)",
          silent_ms, options_.silence_factor, w.id.report_interval_ms, dead_ms);
      session_rank_.erase(w.session_id);
      forget_abort_if_empty(w.id.group);
      dead.push_back(DeadWorker{rank, w.session_id, w.id.group, w.dead_reason});
    } else if (silent_ms > suspect_ms && w.state == WorkerState::kLive) {
      w.state = WorkerState::kSuspect;
      if (new_suspects != nullptr) new_suspects->push_back(rank);
    }
  }
  return dead;
}

void ClusterState::forget_abort_if_empty(const std::string& group) {
  auto record = aborted_.find(group);
  if (record == aborted_.end()) return;
  for (const auto& [rank, w] : workers_) {
    if (HoldsRank(w.state) && w.id.group == group) return;
  }
  aborted_.erase(record);
}

std::vector<int> ClusterState::abort_group(const GroupAbort& abort) {
  std::vector<int> ranks;
  std::lock_guard lock(mu_);
  for (const auto& [rank, w] : workers_) {
    if (HoldsRank(w.state) && w.id.group == abort.group) ranks.push_back(rank);
  }
  if (!ranks.empty()) aborted_.emplace(abort.group, abort);  // an existing record (the first cause) stays
  return ranks;
}

std::optional<GroupAbort> ClusterState::abort_for(std::uint64_t session_id) const {
  std::lock_guard lock(mu_);
  auto s = session_rank_.find(session_id);
  if (s == session_rank_.end()) return std::nullopt;
  auto record = aborted_.find(workers_.at(s->second).id.group);
  if (record == aborted_.end()) return std::nullopt;
  return record->second;
}

int ClusterState::rank_of(std::uint64_t session_id) const {
  std::lock_guard lock(mu_);
  auto s = session_rank_.find(session_id);
  return s == session_rank_.end() ? -1 : s->second;
}

std::uint64_t ClusterState::session_of(int rank) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(rank);
  if (it == workers_.end() || !HoldsRank(it->second.state)) return 0;
  return it->second.session_id;
}

std::vector<int> ClusterState::live_ranks(const std::string& group) const {
  std::vector<int> ranks;
  std::lock_guard lock(mu_);
  for (const auto& [rank, w] : workers_) {
    if (HoldsRank(w.state) && (group.empty() || w.id.group == group)) {
      ranks.push_back(rank);
    }
  }
  return ranks;
}

std::vector<RankProgress> ClusterState::progress(const std::vector<int>& ranks, Clock::time_point now) const {
  std::vector<RankProgress> out;
  std::lock_guard lock(mu_);
  for (int rank : ranks) {
    auto it = workers_.find(rank);
    if (it == workers_.end()) continue;
    const WorkerRecord& w = it->second;
    double rate = w.steps_per_second;
    if (rate == 0.0 && w.step > w.rate_anchor_step && w.last_report_at > w.rate_anchor_at) {
      // No full rate window yet (a trim soon after start): the partial window is a better guess than "not
      // moving", which would put the trim step where a fast rank is already past it.
      rate = static_cast<double>(w.step - w.rate_anchor_step) /
             std::chrono::duration<double>(w.last_report_at - w.rate_anchor_at).count();
    }
    out.push_back(RankProgress{rank, w.step, rate, MillisBetween(w.last_report_at, now)});
  }
  return out;
}

Result<WorkerRecord> ClusterState::worker(int rank) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(rank);
  if (it == workers_.end()) {
    return NotFound(fmt::format("no worker has registered rank {}", rank));
  }
  return it->second;
}

std::vector<WorkerRecord> ClusterState::snapshot(Clock::time_point now) const {
  std::vector<WorkerRecord> out;
  std::lock_guard lock(mu_);
  out.reserve(workers_.size());
  for (const auto& [rank, w] : workers_) {
    out.push_back(w);
    out.back().last_report_age_ms = MillisBetween(w.last_report_at, now);
    auto b = budgets_.find(DeviceKey(w.id));
    out.back().device_budget_bytes = b == budgets_.end() ? 0 : b->second;
  }
  return out;
}

Status ClusterState::set_device_budget(int rank, std::uint64_t budget_bytes) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(rank);
  if (it == workers_.end()) return NotFound(fmt::format("no worker has registered rank {}", rank));
  if (budget_bytes == 0) {
    budgets_.erase(DeviceKey(it->second.id));
  } else {
    budgets_[DeviceKey(it->second.id)] = budget_bytes;
  }
  return Status::Ok();
}

std::uint64_t ClusterState::device_budget(int rank) const {
  std::lock_guard lock(mu_);
  auto it = workers_.find(rank);
  if (it == workers_.end()) return 0;
  auto b = budgets_.find(DeviceKey(it->second.id));
  return b == budgets_.end() ? 0 : b->second;
}

std::vector<int> ClusterState::device_peers(int rank) const {
  std::vector<int> peers;
  std::lock_guard lock(mu_);
  auto self = workers_.find(rank);
  if (self == workers_.end()) return peers;
  const std::string key = DeviceKey(self->second.id);
  for (const auto& [r, w] : workers_) {
    if (HoldsRank(w.state) && DeviceKey(w.id) == key) peers.push_back(r);
  }
  return peers;
}

void ClusterState::note_limit(int rank, const std::string& pool, std::uint64_t limit_bytes) {
  std::lock_guard lock(mu_);
  auto it = workers_.find(rank);
  if (it == workers_.end()) return;
  for (PoolUsage& p : it->second.pools) {
    if (p.name == pool) p.limit_bytes = limit_bytes;
  }
}

}  // namespace memcoord::coordinator
