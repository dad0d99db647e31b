// QuotaBroker: moves memory quota between the pools that share a device. Three ways in: an admin sets a
// pool's limit or a device's budget (SetQuota, waits for the workers' acks), a pool hits OOM and asks for
// room (an OomRequest on its session), and a report shows a pool near its limit (>= 90%, NearLimit: quota
// moves toward it before it runs out, at most every 500 ms per pool). The policy (how much, from whom) is
// quota_policy's; this class applies it through the sessions.
//
// Every move is a transaction (quota_transaction.h): donors shrink and acknowledge before anyone grows, a
// refusal, timeout or death rolls back, and a limit is counted (note_limit) before a grow is sent and only
// after a shrink is acknowledged. So the limits the workers of a device enforce never sum past its budget.
// Moves run one at a time (quota_mu_). An admin's per-pool limit that would take the device's limits past
// its budget is refused (FAILED_PRECONDITION naming the sum).
//
// OOM requests and near-limit moves wait for acks, which a session's callback thread must never do (the
// acks arrive on those threads), so they run on the broker's own thread, in arrival order; the OOM reply
// goes to the requesting session once the move is done (the worker waits up to its oom_wait for it).
// A pool without a quota that hits OOM is never capped (that made every later allocation an OOM): the
// device itself is full, so the broker has the other pools on the device release their idle cache (trim
// now) and grants the retry when some was released.
//
// Thread safety: every method is thread-safe. set_quota blocks its caller for the acks (up to 2 s per phase).
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/serial_runner.h"
#include "coordinator/service/quota_policy.h"
#include "coordinator/service/service_state.h"

namespace memcoord::coordinator {

class QuotaBroker {
 public:
  explicit QuotaBroker(ServiceState& state);
  // Stops the broker thread after the job in progress (queued jobs are dropped: their workers time out).
  ~QuotaBroker();
  QuotaBroker(const QuotaBroker&) = delete;
  QuotaBroker& operator=(const QuotaBroker&) = delete;

  // The SetQuota RPC: `pool` empty sets `rank`'s device budget and splits it over the device's pools.
  Status set_quota(const v1::SetQuotaRequest& request, v1::SetQuotaResponse* reply);
  // An OomRequest from `session`: answered from the broker thread. Never blocks.
  void handle_oom(WorkerSession& session, const v1::OomRequest& request);
  // After a report: moves quota toward `rank`'s pools that are near their limit. Never blocks.
  void rebalance(int rank, const std::vector<PoolUsage>& pools);

 private:
  class SessionPort;

  // Quota views of every pool on `rank`'s device, from the latest reports and recorded limits.
  std::vector<PoolQuotaView> device_pools(int rank) const;
  // Runs `changes` as one transaction. REQUIRES: quota_mu_ held.
  Status move(const std::vector<QuotaChange>& changes, const std::vector<PoolQuotaView>& views);
  // The broker-thread halves of handle_oom and rebalance.
  void answer_oom(std::uint64_t session_id, int rank, const v1::OomRequest& request);
  void relieve(int rank, const std::string& pool, std::uint64_t requested_bytes);
  // An unlimited pool's OOM: other pools on the device release their idle cache; returns the bytes freed.
  std::uint64_t free_peer_cache(int rank, const std::string& pool, std::string* detail);
  void post(std::function<void()> job);

  ServiceState& state_;
  std::mutex quota_mu_;  // one move at a time

  std::mutex rebalance_mu_;
  // rebalance_mu_ guards the following: when each (rank, pool) was last given quota (rate limit).
  std::map<std::pair<int, std::string>, Clock::time_point> last_rebalance_;

  // The broker's thread (a failed job ends that job, not the coordinator). Last: stopped and destroyed
  // before everything its jobs use.
  SerialRunner jobs_{"coordinator: quota job"};
};

}  // namespace memcoord::coordinator
