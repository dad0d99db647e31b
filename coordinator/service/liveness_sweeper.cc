#include "coordinator/service/liveness_sweeper.h"

namespace memcoord::coordinator {

LivenessSweeper::LivenessSweeper(ServiceState& state, WorkerEvents& events)
    : state_(state), events_(events), thread_([this] {
        while (!state_.stop.sleep_for(state_.options.liveness_period)) sweep_once();
      }) {}

LivenessSweeper::~LivenessSweeper() { join(); }

void LivenessSweeper::join() {
  if (thread_.joinable()) thread_.join();
}

void LivenessSweeper::sweep_once() {
  for (const DeadWorker& dead : state_.cluster.sweep(Clock::now())) {
    state_.sessions.cancel(dead.session_id);
    events_.on_dead(dead);
  }
}

}  // namespace memcoord::coordinator
