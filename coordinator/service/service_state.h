// ServiceState: what the coordinator service's parts share: the core (cluster state, acks, trims, leak
// watch), the live sessions and the slots they take, the bootstrap store, command ids and the stop signal.
// The service owns one; the Attach events, the RPC handlers, the quota broker and the liveness sweeper each
// hold a reference. It holds no gRPC type, so the parts that use it compile without gRPC headers.
//
// Thread safety: every member is thread-safe on its own; the methods here are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "coordinator/service/ack_board.h"
#include "coordinator/service/cluster_state.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/kv_store.h"
#include "coordinator/service/latency_histogram.h"
#include "coordinator/service/leak_watch.h"
#include "coordinator/service/report_latency.h"
#include "coordinator/service/session_registry.h"
#include "coordinator/service/session_slots.h"
#include "coordinator/service/trim_orchestrator.h"
#include "memcoord/v1/coordinator.pb.h"

namespace memcoord::coordinator {

// A one-way stop flag that sleepers can wait on (the liveness thread, Watch streams).
class StopSignal {
 public:
  // Raises the flag and wakes every sleeper; false when it was already raised.
  bool raise();
  bool raised() const { return raised_.load(); }
  // Sleeps up to `period`; returns raised().
  bool sleep_for(std::chrono::milliseconds period);

 private:
  std::atomic<bool> raised_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

struct ServiceState {
  explicit ServiceState(const CoordinatorOptions& options);

  // Command ids (trim, quota) start at a random base per coordinator process and count up from it: a worker
  // keeps a command it had not yet applied across a coordinator restart and acks it to the new coordinator,
  // whose own ids must not collide (ids from 1 did: a stale ack completed a new command). The base lies in
  // [2^32, 2^53): never a small number, exact as a JSON number, and never near wrapping.
  std::uint64_t next_command_id() { return next_command_id_++; }
  // The first id this process hands out.
  std::uint64_t first_command_id() const { return first_command_id_; }
  // Sends to the live session holding `rank`; false when there is none or the send was refused.
  bool send_to_rank(int rank, const v1::CoordinatorMessage& message);
  // The cluster as GetCluster, Watch and /metrics show it.
  ClusterView snapshot() const;

  const CoordinatorOptions options;
  const std::string coordinator_id;
  const Clock::time_point started_at;
  ClusterState cluster;
  AckBoard acks;
  TrimOrchestrator trims;
  LeakWatch leaks;
  LatencyRecorder report_latency;
  LatencyHistogram trim_fanout;  // seconds, every trim the Trim RPC ran (the /metrics histogram)
  SessionRegistry sessions;
  SessionSlots session_slots;  // open Attach streams, registered or not (--max-sessions)
  SessionSlots watch_slots;    // open Watch streams (--max-watches)
  KvStore kv;
  StopSignal stop;

 private:
  const std::uint64_t first_command_id_;
  std::atomic<std::uint64_t> next_command_id_;
};

}  // namespace memcoord::coordinator
