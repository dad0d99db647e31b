#include "coordinator/service/service_state.h"

#include <fmt/format.h>

#include <random>

namespace memcoord::coordinator {
namespace {

std::string MakeCoordinatorId() {
  const auto ticks = std::chrono::system_clock::now().time_since_epoch().count();
  return fmt::format("{:x}", static_cast<std::uint64_t>(ticks));
}

// Uniform in [2^32, 2^53) from std::random_device (service_state.h says why).
std::uint64_t RandomCommandIdBase() {
  std::random_device device;
  const std::uint64_t bits = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  constexpr std::uint64_t kLow = std::uint64_t{1} << 32;
  constexpr std::uint64_t kHigh = std::uint64_t{1} << 53;
  return kLow + bits % (kHigh - kLow);
}

}  // namespace

bool StopSignal::raise() {
  {
    std::lock_guard lock(mu_);
    if (raised_.exchange(true)) return false;
  }
  cv_.notify_all();
  return true;
}

bool StopSignal::sleep_for(std::chrono::milliseconds period) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, period, [this] { return raised_.load(); });
  return raised_.load();
}

ServiceState::ServiceState(const CoordinatorOptions& service_options)
    : options(service_options),
      coordinator_id(MakeCoordinatorId()),
      started_at(Clock::now()),
      cluster(ClusterStateOptions{service_options.silence_factor, 1 << 16, service_options.dead_after}),
      trims(acks, service_options.trim),
      leaks(service_options.leak),
      session_slots(service_options.limits.max_sessions),
      watch_slots(service_options.limits.max_watches),
      first_command_id_(RandomCommandIdBase()),
      next_command_id_(first_command_id_) {}

bool ServiceState::send_to_rank(int rank, const v1::CoordinatorMessage& message) {
  return sessions.send(cluster.session_of(rank), message);
}

ClusterView ServiceState::snapshot() const {
  ClusterView view;
  const Clock::time_point now = Clock::now();
  view.workers = cluster.snapshot(now);
  view.leaks = leaks.alerts();
  view.stats.coordinator_id = coordinator_id;
  view.stats.uptime_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now - started_at).count());
  view.stats.reports = report_latency.count();
  view.stats.report_handling_p50_us = report_latency.percentile(50);
  view.stats.report_handling_p99_us = report_latency.percentile(99);
  view.stats.live_sessions = sessions.size();
  view.stats.trim_fanout = trim_fanout.snapshot();
  return view;
}

}  // namespace memcoord::coordinator
