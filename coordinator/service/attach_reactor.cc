#include "coordinator/service/attach_reactor.h"

#include <deque>
#include <mutex>

#include "coordinator/service/status_mapping.h"

namespace memcoord::coordinator {
namespace {

class AttachReactor final : public grpc::ServerBidiReactor<v1::WorkerMessage, v1::CoordinatorMessage>,
                            public WorkerSession {
 public:
  AttachReactor(grpc::CallbackServerContext* context, ServiceState& state, WorkerEvents& events,
                const Status& admission)
      : context_(context), state_(state), events_(events) {
    if (!admission.ok()) {
      finish(admission);
      return;
    }
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

  void OnReadDone(bool ok) override {
    if (!ok) {
      end(context_->IsCancelled(), Status::Ok());
      return;
    }
    Status result = events_.on_message(*this, in_);
    if (!result.ok()) {
      end(false, result);
      return;
    }
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
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

  void OnDone() override {
    events_.on_end(*this, /*broken=*/true, Status::Ok());  // no-op when already ended
    delete this;
  }

 private:
  static constexpr std::size_t kMaxOutbox = 4096;

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
