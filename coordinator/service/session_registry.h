// SessionRegistry: the live, registered Attach sessions by session id, and WorkerSession, what the rest of
// the service may do with one (send a command, cancel it) without knowing it is a gRPC reactor.
//
// Lifetime invariant: a session's owner (the Attach reactor) removes it from the registry before the
// session is destroyed, so a WorkerSession reached under the registry's lock is valid while that lock is
// held. Every method here takes that lock and does only non-blocking work on the session (send() queues).
//
// Thread safety: every method is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

#include "memcoord/v1/coordinator.pb.h"

namespace memcoord::coordinator {

class WorkerSession {
 public:
  virtual ~WorkerSession() = default;
  // Queues `message` for the worker; false when the stream is finishing or the worker stopped reading.
  // Never blocks.
  virtual bool send(const v1::CoordinatorMessage& message) = 0;
  // Cancels the stream (the worker sees it broken); the session then ends through its owner.
  virtual void cancel() = 0;

  std::uint64_t id = 0;  // 0 until registered; then fixed
  int rank = -1;         // -1 until registered
};

class SessionRegistry {
 public:
  // REQUIRES: session->id != 0.
  void add(WorkerSession* session);
  // Removes `session` when it is the one registered under its id; false when it was never registered or
  // was already removed (so exactly one caller sees true).
  bool remove(const WorkerSession* session);
  // Sends to the session registered under `session_id`; false when there is none or send() refused.
  bool send(std::uint64_t session_id, const v1::CoordinatorMessage& message);
  void cancel(std::uint64_t session_id);
  void cancel_all();
  std::size_t size() const;

 private:
  mutable std::mutex mu_;
  // mu_ guards the following.
  std::map<std::uint64_t, WorkerSession*> sessions_;
};

}  // namespace memcoord::coordinator
