// WorkerEvents: what the messages on a worker's Attach session do, and what happens when a worker dies.
// The Attach reactor owns the stream; it hands every message here and reports the session's end.
//
//   first message      must be Register: claims the rank, records the session, replies Registered; into a
//                      group that is still aborted (cluster_state.h), the group's Abort follows at once.
//   Report             updates the cluster state and leak watch; a pool near its limit gets quota moved to
//                      it. A report for a rank the session no longer holds ends the session.
//   Ack                delivered to the command waiting for it.
//   OomRequest         the quota broker answers on the same session.
//   Detach             the worker ends its session on purpose (sent last): failed = false only detaches it;
//                      failed = true marks it dead with the worker's reason and aborts its group, as below.
//                      The session is over at once; a later end of the stream changes nothing.
//   session end        without a Detach: a broken stream or protocol error marks the worker dead and aborts
//                      its group (every live rank of the group gets an Abort naming it, and the group stays
//                      aborted until all its ranks left); a clean close
//                      (WritesDone) only detaches it.
//
// Thread safety: every method is thread-safe (called from gRPC's callback threads and the sweeper).
#pragma once

#include <cstddef>
#include <string>

#include "coordinator/service/quota_broker.h"
#include "coordinator/service/service_state.h"

namespace memcoord::coordinator {

class WorkerEvents {
 public:
  WorkerEvents(ServiceState& state, QuotaBroker& quotas) : state_(state), quotas_(quotas) {}

  // Handles one message of `session`. A non-OK result ends the session with that status.
  Status on_message(WorkerSession& session, const v1::WorkerMessage& message);
  // The session is over: `broken` when the stream broke, `result` non-OK for a protocol error. A no-op
  // for a session that never registered or already ended.
  void on_end(WorkerSession& session, bool broken, const Status& result);
  // A worker died (broken session or silent): strikes it off pending commands, aborts its group.
  void on_dead(const DeadWorker& dead);

  // A failed Detach's reason is cut to this many bytes (at a UTF-8 boundary) before it is recorded and sent.
  static constexpr std::size_t kMaxDetachReasonBytes = 1024;

 private:
  // The session ended by a Detach message (see the table above).
  void on_detach(WorkerSession& session, const v1::Detach& detach);
  // Takes `session` out of the service once (a no-op after the first call or for an unregistered one) and
  // records the worker dead with `reason`; `dead`: aborts its group, else it only detached.
  void leave(WorkerSession& session, bool dead, const std::string& reason);
  Status on_register(WorkerSession& session, const v1::Register& request);
  Status on_report(WorkerSession& session, const v1::Report& report);

  ServiceState& state_;
  QuotaBroker& quotas_;
};

}  // namespace memcoord::coordinator
