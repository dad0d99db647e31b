// LivenessSweeper: a thread that, every `liveness_period`, moves silent workers along ClusterState's
// two-stage liveness (sweep): suspect after silence_factor x their report interval (logged, nothing else),
// dead after dead_after without a report: it cancels their sessions and hands each to WorkerEvents::on_dead
// (which aborts its group). It stops when the service's stop signal is raised.
//
// Thread safety: start/join from the owning thread only; the sweep itself uses only thread-safe parts.
#pragma once

#include <thread>

#include "coordinator/service/service_state.h"
#include "coordinator/service/worker_events.h"

namespace memcoord::coordinator {

class LivenessSweeper {
 public:
  LivenessSweeper(ServiceState& state, WorkerEvents& events);
  // Joins the thread; REQUIRES: the stop signal was raised (or is raised by another thread).
  ~LivenessSweeper();
  LivenessSweeper(const LivenessSweeper&) = delete;
  LivenessSweeper& operator=(const LivenessSweeper&) = delete;

  // One sweep now (the thread's body; public for tests).
  void sweep_once();
  // Waits for the thread to end after the stop signal. Idempotent.
  void join();

 private:
  ServiceState& state_;
  WorkerEvents& events_;
  std::thread thread_;
};

}  // namespace memcoord::coordinator
