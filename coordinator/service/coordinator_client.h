// CoordinatorClient: the admin side of the coordinator (memcoord status/trim/quota, tests, benchmarks).
// It wraps the gRPC stub (pimpl: no gRPC type here), makes a fresh context per call with a deadline and the
// bearer token, and turns every gRPC status into a memcoord Status through the one mapping.
//
// Thread safety: every method may be called from several threads. Failure: UNAVAILABLE when the coordinator
// cannot be reached, UNAUTHENTICATED for a missing or wrong token, PERMISSION_DENIED for the worker token on
// an admin RPC (Trim, SetQuota, Plan), otherwise the coordinator's code and
// message prefixed with the call's name.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "coordinator/service/cluster_types.h"
#include "coordinator/service/quota_policy.h"
#include "coordinator/service/trim_orchestrator.h"

namespace memcoord::coordinator {

struct ClientOptions {
  std::string address;  // "127.0.0.1:PORT"
  std::string token;    // the bearer token sent (worker or admin; access_policy.h); empty: none
  // TLS (PEM text, not paths). ca_pem set: a TLS channel verifying the coordinator against it; cert_pem
  // and key_pem add a client certificate (mutual TLS). All empty: plaintext.
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::chrono::milliseconds timeout{5000};  // per unary call (Trim adds its own deadline)
};

// Reads a token file: its first line, surrounding whitespace removed. NOT_FOUND / INVALID_ARGUMENT (empty).
Result<std::string> ReadTokenFile(const std::string& path);

// What the Plan RPC answered: the plan as `memcoord plan` prints it (JSON and table) and the live devices.
struct RemotePlan {
  bool feasible = false;
  std::string reason;               // why not, when infeasible
  std::string plan_json;            // `memcoord plan --json`'s JSON
  std::string plan_table;           // `memcoord plan`'s table
  std::vector<LiveDevice> devices;  // empty when the request named its devices
};

class CoordinatorClient {
 public:
  explicit CoordinatorClient(const ClientOptions& options);
  ~CoordinatorClient();
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  Result<ClusterView> GetCluster();
  // `group` empty: every live worker.
  Result<TrimOutcome> Trim(const TrimSpec& spec, const std::string& group = "");
  // `pool` empty: the device budget of `rank`'s device. Returns the quotas assigned.
  Result<std::vector<QuotaChange>> SetQuota(int rank, const std::string& pool, std::int64_t limit_bytes);
  // Calls `on_snapshot` for every snapshot until it returns false or the stream ends.
  Status Watch(std::uint32_t interval_ms, const std::function<bool(const ClusterView&)>& on_snapshot);
  Status Put(const std::string& key, const std::string& value);
  Result<std::string> Get(const std::string& key, std::uint32_t wait_ms);
  // Plans `request_json` (the plan file's text; "devices" optional) on the coordinator's live memory. An
  // infeasible plan is a result (feasible false), not an error. Waits up to max(timeout, 30 s).
  Result<RemotePlan> Plan(const std::string& request_json);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord::coordinator
