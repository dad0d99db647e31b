// QuotaBroker: moves memory quota between the pools that share a device. Three ways in: an admin sets a
// pool's limit or a device's budget (SetQuota, waits for the worker's ack), a pool hits OOM and asks for
// room (an OomRequest on its session; donors shrink, the requester grows), and a report shows a pool near
// its limit (>= 90%: quota moves toward it before it runs out, at most every 500 ms per pool). The policy
// (how much, from whom) is quota_policy's; this class applies it through the sessions.
//
// Thread safety: every method is thread-safe. set_quota blocks its caller for the acks (up to 2 s).
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/service/quota_policy.h"
#include "coordinator/service/service_state.h"

namespace memcoord::coordinator {

class QuotaBroker {
 public:
  explicit QuotaBroker(ServiceState& state) : state_(state) {}

  // The SetQuota RPC: `pool` empty sets `rank`'s device budget and splits it over the device's pools.
  Status set_quota(const v1::SetQuotaRequest& request, v1::SetQuotaResponse* reply);
  // An OomRequest from `session`: the reply is queued on the session after the donors' commands.
  void handle_oom(WorkerSession& session, const v1::OomRequest& request);
  // After a report: moves quota toward `rank`'s pools that are near their limit.
  void rebalance(int rank, const std::vector<PoolUsage>& pools);

 private:
  // Quota views of every pool on `rank`'s device, from the latest reports.
  std::vector<PoolQuotaView> device_pools(int rank) const;
  // Sends the changes in order; with `wait_for_acks`, waits for each and records only acknowledged limits.
  Status apply_limits(const std::vector<QuotaChange>& changes, bool wait_for_acks);

  ServiceState& state_;
  std::mutex rebalance_mu_;
  // rebalance_mu_ guards the following: when each (rank, pool) was last given quota (rate limit).
  std::map<std::pair<int, std::string>, Clock::time_point> last_rebalance_;
};

}  // namespace memcoord::coordinator
