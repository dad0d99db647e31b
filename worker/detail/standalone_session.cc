// Built instead of coordinator_session.cc when gRPC is absent: a session that never attaches, so the
// worker runs standalone (MEMCOORD_COORDINATOR is then ignored, with a warning).
#include <spdlog/spdlog.h>

#include "worker/detail/coordinator_session.h"

namespace memcoord::detail {

class CoordinatorSession::Impl {
 public:
  SessionConfig config;
};

CoordinatorSession::CoordinatorSession(SessionConfig config, SessionHost& /*host*/)
    : impl_(std::make_unique<Impl>(Impl{std::move(config)})) {}
CoordinatorSession::~CoordinatorSession() = default;
void CoordinatorSession::start() {
  spdlog::warn("worker: built without gRPC; coordinator {} ignored, running standalone",
               impl_->config.address);
}
void CoordinatorSession::stop() {}
void CoordinatorSession::fail(std::string) {}
void CoordinatorSession::report(ReportSample) {}
void CoordinatorSession::ack(const CommandAck&) {}
Result<OomAnswer> CoordinatorSession::ask_oom(const OomQuestion&, std::chrono::milliseconds) {
  return Unavailable("built without gRPC: no coordinator");
}
bool CoordinatorSession::attached() const { return false; }
std::string CoordinatorSession::coordinator_id() const { return {}; }
std::uint64_t CoordinatorSession::registrations() const { return 0; }

}  // namespace memcoord::detail
