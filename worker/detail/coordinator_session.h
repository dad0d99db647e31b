// CoordinatorSession: a worker's one Attach stream to the coordinator, on a background thread. It
// registers, sends queued reports and acks, sends a periodic report every interval, hands incoming
// commands to its host, and on any break (coordinator down, restarted, unreachable) reconnects with
// jittered exponential backoff (reconnect_min .. reconnect_max, reconnect_backoff.h) and registers again.
// An exception on either session thread (the host's deliver()/sample(), or the session itself) never ends
// the process: it is logged, the session detaches cleanly (the coordinator sees a detach, not a death) and
// a new one is attached after the backoff; the worker runs standalone meanwhile. A session ends on purpose
// with a Detach message: clean from stop(), failed from fail(), which makes the coordinator abort the group.
// The channel pings the coordinator after 1 s without a read (keepalive) and treats 2 s without an answer as
// a broken connection. Nothing here ever blocks the
// caller of report()/ack() (they queue; the queue is bounded and drops the oldest reports first).
//
// Thread safety: every public method is thread-safe. The host's callbacks run on the session's threads.
// No gRPC type appears here (pimpl). The host must outlive the session.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/result.h"
#include "worker/detail/session_types.h"
#include "worker/detail/worker_credentials.h"

namespace memcoord::detail {

struct SessionConfig {
  std::string address;
  WorkerCredentials credentials;  // token and TLS, resolved and checked
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  std::string host;
  int device = -1;
  std::string device_name;
  std::string device_uuid;  // "GPU-..." (DeviceInfo::uuid); empty without a GPU
  std::string backend;
  std::uint64_t device_total_bytes = 0;
  std::string group = "world";
  std::int64_t pid = 0;
  std::chrono::milliseconds report_interval{100};
  std::chrono::milliseconds reconnect_min{20};
  std::chrono::milliseconds reconnect_max{250};
};

// What the session needs from its worker.
class SessionHost {
 public:
  virtual ~SessionHost() = default;
  // A periodic report (not at a step end): current step and pool counters.
  virtual ReportSample sample() = 0;
  // A command from the coordinator (on the session's reader thread).
  virtual void deliver(const WorkerCommand& command) = 0;
};

class CoordinatorSession {
 public:
  CoordinatorSession(SessionConfig config, SessionHost& host);
  ~CoordinatorSession();  // stops: detaches cleanly when attached
  CoordinatorSession(const CoordinatorSession&) = delete;
  CoordinatorSession& operator=(const CoordinatorSession&) = delete;

  void start();
  // Detaches cleanly (Detach{failed = false}) and stops the session thread. Bounded: about kDetachWait
  // (0.5 s) when the coordinator does not answer; at once while still connecting. Idempotent.
  // REQUIRES: not called from the host's callbacks (they run on the session's threads).
  void stop();
  // As stop(), but the Detach says failed with `reason` (made valid UTF-8, cut to 1000 bytes): the
  // coordinator marks this rank dead and aborts its group, naming `reason`. When not attached at that moment
  // nothing is sent. A no-op once stopped.
  void fail(std::string reason);

  void report(ReportSample sample);
  void ack(const CommandAck& ack);
  // Asks the coordinator for room and waits up to `wait`. UNAVAILABLE when not attached or the answer
  // did not come in time.
  Result<OomAnswer> ask_oom(const OomQuestion& question, std::chrono::milliseconds wait);

  bool attached() const;
  std::string coordinator_id() const;   // of the current session; empty when not attached
  std::uint64_t registrations() const;  // successful registrations so far (re-attaches count)

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memcoord::detail
