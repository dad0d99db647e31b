#include "coordinator/service/liveness_sweeper.h"

#include <spdlog/spdlog.h>

#include <exception>

namespace memcoord::coordinator {

LivenessSweeper::LivenessSweeper(ServiceState& state, WorkerEvents& events)
    : state_(state), events_(events), thread_([this] {
        while (!state_.stop.sleep_for(state_.options.liveness_period)) {
          try {  // an exception would end the process from this thread: log it and sweep again next period
            sweep_once();
          } catch (const std::exception& e) {
            spdlog::error("coordinator: liveness sweep failed: {}", e.what());
          }
        }
      }) {}

LivenessSweeper::~LivenessSweeper() { join(); }

void LivenessSweeper::join() {
  if (thread_.joinable()) thread_.join();
}

void LivenessSweeper::sweep_once() {
  std::vector<int> suspects;
  std::vector<DeadWorker> dead_workers = state_.cluster.sweep(Clock::now(), &suspects);
  for (int rank : suspects) {
    spdlog::warn(
        "coordinator: rank {} is suspect: no report for {} report intervals; dead after {} ms without one",
        rank, state_.options.silence_factor, state_.options.dead_after.count());
  }
  for (const DeadWorker& dead : dead_workers) {
    state_.sessions.cancel(dead.session_id);
    events_.on_dead(dead);
  }
}

}  // namespace memcoord::coordinator
