#include "coordinator/http/cluster_events.h"

#include <fmt/format.h>

#include <map>

namespace memcoord::coordinator {
namespace {

std::string Bytes(std::uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.1f} KiB", static_cast<double>(b) / (1ull << 10));
  return fmt::format("{} B", b);
}

const PoolUsage* FindPool(const WorkerRecord& w, const std::string& name) {
  for (const PoolUsage& p : w.pools) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

void DiffPools(const WorkerRecord& before, const WorkerRecord& after, std::int64_t unix_ms,
               std::vector<ClusterEvent>& out) {
  const int rank = after.id.rank;
  for (const PoolUsage& p : after.pools) {
    const PoolUsage* old = FindPool(before, p.name);
    if (old == nullptr) continue;
    if (p.trims > old->trims) {
      const std::uint64_t released =
          p.trimmed_bytes >= old->trimmed_bytes ? p.trimmed_bytes - old->trimmed_bytes : 0;
      out.push_back({unix_ms, rank, "trim", p.name, released, p.trims - old->trims,
                     fmt::format("trim released {} from pool '{}'", Bytes(released), p.name)});
    }
    if (p.ooms > old->ooms) {
      out.push_back({unix_ms, rank, "oom", p.name, 0, p.ooms - old->ooms,
                     fmt::format("{} allocation(s) failed in pool '{}'", p.ooms - old->ooms, p.name)});
    }
    if (p.limit_bytes != old->limit_bytes) {
      const auto text = [](std::uint64_t b) { return b == 0 ? std::string("none") : Bytes(b); };
      out.push_back(
          {unix_ms, rank, "quota", p.name, p.limit_bytes, 1,
           fmt::format("quota of pool '{}': {} -> {}", p.name, text(old->limit_bytes), text(p.limit_bytes))});
    }
  }
}

}  // namespace

std::vector<ClusterEvent> DiffClusterViews(const ClusterView& before, const ClusterView& after,
                                           std::int64_t unix_ms) {
  std::map<int, const WorkerRecord*> old;
  for (const WorkerRecord& w : before.workers) old[w.id.rank] = &w;
  std::vector<ClusterEvent> out;
  for (const WorkerRecord& w : after.workers) {
    const int rank = w.id.rank;
    auto it = old.find(rank);
    // A new session, or a dead rank alive again (views over gRPC carry no session id): a new process.
    const bool reborn =
        it != old.end() && it->second->state == WorkerState::kDead && w.state != WorkerState::kDead;
    if (it == old.end() || it->second->session_id != w.session_id || reborn) {
      if (w.state != WorkerState::kDead) {
        out.push_back({unix_ms, rank, "register", "", 0, 1,
                       fmt::format("rank {} registered (host {}, pid {})", rank, w.id.host, w.id.pid)});
      } else if (it == old.end()) {
        continue;  // seen first already dead: nothing happened between the two views
      }
    }
    const bool same_session = it != old.end() && it->second->session_id == w.session_id && !reborn;
    if (same_session) DiffPools(*it->second, w, unix_ms, out);
    const WorkerState before_state = same_session ? it->second->state : WorkerState::kLive;
    if (w.state != before_state) {
      std::string detail =
          w.state == WorkerState::kDead ? fmt::format("rank {} dead: {}", rank, w.dead_reason)
          : w.state == WorkerState::kSuspect
              ? fmt::format("rank {} suspect: no report for {} ms", rank, w.last_report_age_ms)
              : fmt::format("rank {} reports again", rank);
      out.push_back({unix_ms, rank, StateName(w.state), "", 0, 1, std::move(detail)});
    }
  }
  return out;
}

}  // namespace memcoord::coordinator
