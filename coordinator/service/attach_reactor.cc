#include "coordinator/service/attach_reactor.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <deque>
#include <exception>
#include <mutex>

#include "coordinator/service/rate_limiter.h"
#include "coordinator/service/status_mapping.h"

namespace memcoord::coordinator {
namespace {

// Reports (and messages of no or an unknown kind, which do nothing) count against --max-report-rate. Acks
// answer the coordinator's own commands, so the admin's trims and quota moves bound their rate (a soak
// runs hundreds of trims a second); an OomRequest blocks the allocation that sent it until it is answered.
// A Detach ends the session, so it comes once: cutting it off would lose its reason.
bool CountsAgainstReportRate(const v1::WorkerMessage& message) {
  const auto kind = message.kind_case();
  return kind != v1::WorkerMessage::kAck && kind != v1::WorkerMessage::kOom &&
         kind != v1::WorkerMessage::kRegister && kind != v1::WorkerMessage::kDetach;
}

class AttachReactor final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
                            public WorkerSession {
 public:
  AttachReactor(grpc::CallbackServerContext* context, ServiceState& state, WorkerEvents& events,
                const Status& admission)
      : context_(context),
        state_(state),
        events_(events),
        limiter_(state.options.limits.max_reports_per_second, state.options.limits.max_reports_per_second) {
    if (!admission.ok()) {
      finish(admission);
      return;
    }
    if (!state_.session_slots.try_take()) {
      finish(ResourceExhausted(fmt::format(
          "the coordinator serves at most {} sessions at once (--max-sessions {}); try again later",
          state_.session_slots.max(), state_.session_slots.max())));
      return;
    }
    holds_slot_ = true;
    StartRead(&in_);
  }

  bool send(const v1::CoordinatorMessage& message) override {
    const v1::CoordinatorMessage* next = nullptr;
    {
      std::lock_guard lock(mu_);
      if (finishing_ || outbox_.size() >= kMaxOutbox) return false;
      outbox_.push_back(message);
      if (writing_) return true;
      writing_ = true;
      next = &outbox_.front();  // deque elements stay put while others are appended
    }
    StartWrite(next);
    return true;
  }

  void cancel() override { context_->TryCancel(); }

  // gRPC calls the reactions below on its own threads, where an exception would end the process: each
  // catches everything, logs it and ends this stream with INTERNAL; the coordinator serves on.
  void OnReadDone(bool ok) override {
    try {
      read_done(ok);
    } catch (const std::exception& e) {
      fail("handling a message", e.what());
    } catch (...) {
      fail("handling a message", "an exception that is not a std::exception");
    }
  }

  void OnWriteDone(bool ok) override {
    try {
      write_done(ok);
    } catch (const std::exception& e) {
      fail("sending a command", e.what());
    } catch (...) {
      fail("sending a command", "an exception that is not a std::exception");
    }
  }

  void OnDone() override {
    try {
      events_.on_end(*this, /*broken=*/true, Status::Ok());  // no-op when already ended
    } catch (const std::exception& e) {
      spdlog::error("coordinator: session {} (rank {}): ending it threw: {}", id, rank, e.what());
    } catch (...) {
      spdlog::error("coordinator: session {} (rank {}): ending it threw", id, rank);
    }
    if (holds_slot_) state_.session_slots.give_back();
    delete this;
  }

 private:
  static constexpr std::size_t kMaxOutbox = 4096;

  void read_done(bool ok) {
    if (!ok) {
      // A worker that sent Detach has already left (WorkerEvents), and this end changes nothing. Without
      // one, whether the call was cancelled is the only hint left: cancelled (the process died, or its
      // connection did) is a death, a clean close a detach.
      end(context_->IsCancelled(), Status::Ok());
      return;
    }
    if (CountsAgainstReportRate(in_) && !limiter_.allow(Clock::now())) {
      const double rate = limiter_.per_second();
      spdlog::warn("coordinator: session {} (rank {}) sends more than {:g} reports/s: cut off", id, rank,
                   rate);
      end(false,
          ResourceExhausted(fmt::format(
              "this session sent more than {:g} reports per second, sustained (--max-report-rate {:g}): "
              "cut off",
              rate, rate)));
      return;
    }
    if (state_.options.before_attach_message) state_.options.before_attach_message(in_.kind_case());
    Status result = events_.on_message(*this, in_);
    if (!result.ok()) {
      end(false, result);
      return;
    }
    StartRead(&in_);
  }

  // Logs an exception caught in a reaction and ends the stream with INTERNAL (finish() runs once).
  void fail(const char* what, const char* error) {
    spdlog::error("coordinator: session {} (rank {}): exception while {}: {}; ending that session", id, rank,
                  what, error);
    const Status status = Internal(fmt::format("coordinator error while {}: {}", what, error));
    try {
      events_.on_end(*this, /*broken=*/false, status);
    } catch (...) {
      spdlog::error("coordinator: session {} (rank {}): ending it threw as well", id, rank);
    }
    finish(status);
  }

  void write_done(bool ok) {
    const v1::CoordinatorMessage* next = nullptr;
    bool finish_now = false;
    {
      std::lock_guard lock(mu_);
      outbox_.pop_front();
      if (!ok) outbox_.clear();  // the stream is broken; the pending read ends the session
      if (!outbox_.empty()) {
        next = &outbox_.front();
      } else {
        writing_ = false;
        finish_now = finishing_ && !finished_;
        if (finish_now) finished_ = true;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish_now) Finish(ToGrpcStatus(finish_status_));
  }

  // The session is over (reads ended or a protocol error): leave the service, then finish the call.
  void end(bool broken, const Status& result) {
    events_.on_end(*this, broken, result);
    Status status = result;
    if (status.ok() && state_.stop.raised()) status = Unavailable("coordinator shutting down");
    finish(status);
  }

  // Finishes once, after queued writes drained (a write in flight completes first).
  void finish(const Status& status) {
    {
      std::lock_guard lock(mu_);
      if (finishing_) return;
      finishing_ = true;
      finish_status_ = status;
      if (writing_) return;  // OnWriteDone finishes
      finished_ = true;
    }
    Finish(ToGrpcStatus(status));
  }

  grpc::CallbackServerContext* const context_;
  ServiceState& state_;
  WorkerEvents& events_;
  v1::WorkerMessage in_;
  RateLimiter limiter_;      // touched by read_done only: one read in flight at a time
  bool holds_slot_ = false;  // set in the constructor, read in OnDone

  std::mutex mu_;
  // mu_ guards the following.
  std::deque<v1::CoordinatorMessage> outbox_;
  bool writing_ = false;
  bool finishing_ = false;
  bool finished_ = false;
  Status finish_status_;
};

}  // namespace

grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>* StartAttachSession(
    grpc::CallbackServerContext* context, ServiceState& state, WorkerEvents& events,
    const Status& admission) {
  return new AttachReactor(context, state, events, admission);
}

}  // namespace memcoord::coordinator
