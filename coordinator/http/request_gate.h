// RequestGate: holds the HTTP server's connections off its worker threads until a whole request (head and
// body, request_framing.h) has arrived, then hands the connection on. One thread polls every waiting
// connection with non-blocking reads, so a client that sends slowly, or nothing at all ("slowloris"), costs
// a file descriptor and a buffer, never a worker thread: it cannot stall /metrics for anyone else.
//
// Deadlines, counted from when the gate starts waiting for a request (a new connection, or a kept-alive
// connection's next request): the request must be whole within `request_deadline`, and no more than
// `read_stall` may pass before its first byte and between any two reads (`keep_alive_idle` before the
// first byte of a kept-alive connection's next request). Past either, the connection is closed: after a 408
// when part of the request had arrived, silently when none had. A request that can never be accepted
// (FrameRequest's refusals: 400, 411, 413, 431) is answered at once and closed, its body unread. A client
// that closes its sending side after a whole request still gets its answer.
//
// At most `max_waiting` connections wait at once: Admit blocks while that many do (the accept loop then
// accepts nothing, and new clients wait in the kernel's listen backlog), so the descriptors held stay
// bounded.
//
// Thread safety: Admit and Return from any thread; Stop from one thread. `dispatch` runs on the gate's
// thread and must hand the connection on quickly (the gate reads nothing while it runs). After Stop, every
// waiting connection is closed, and Admit and Return close what they are given.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/result.h"
#include "coordinator/http/request_framing.h"

namespace memcoord::coordinator {

// One client's connection. Owns its socket, closed when the last owner lets go.
struct HttpConnection {
  explicit HttpConnection(int fd_in) : fd(fd_in) {}
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  const int fd;
  std::string received;      // read and not yet served: a dispatched request starts at its front
  bool peer_closed = false;  // the client closed its sending side: nothing more will arrive
  std::size_t served = 0;    // requests answered on this connection
};

struct RequestGateOptions {
  std::chrono::milliseconds request_deadline{5000};
  std::chrono::milliseconds read_stall{2000};
  std::chrono::milliseconds keep_alive_idle{1000};
  FrameLimits limits;
  std::size_t max_waiting = 128;
};

class RequestGate {
 public:
  using Clock = std::chrono::steady_clock;
  // Called with a connection whose `received` starts with one whole request of `request_bytes` bytes.
  using Dispatch = std::function<void(std::shared_ptr<HttpConnection> connection, std::size_t request_bytes)>;

  // UNAVAILABLE when the gate's wake-up descriptor cannot be made.
  static Result<std::unique_ptr<RequestGate>> Start(const RequestGateOptions& options, Dispatch dispatch);
  ~RequestGate();
  RequestGate(const RequestGate&) = delete;
  RequestGate& operator=(const RequestGate&) = delete;

  // A freshly accepted socket, which the gate now owns (made non-blocking). Blocks while max_waiting wait.
  void Admit(int fd);
  // A served connection to keep alive: waits for its next request (which may already be in `received`).
  // Closed instead when max_waiting connections already wait.
  void Return(std::shared_ptr<HttpConnection> connection);
  // Closes every waiting connection and ends the gate's thread; idempotent.
  void Stop();

 private:
  struct Waiting {
    std::shared_ptr<HttpConnection> connection;
    Clock::time_point deadline;        // the whole request by then
    Clock::time_point stall_deadline;  // the next byte by then
    bool check_now = false;            // `received` may already hold a request: frame it without a read
    bool sent_continue = false;        // "100 Continue" was sent for this request
  };

  RequestGate(const RequestGateOptions& options, Dispatch dispatch, int wake_fd);
  // Queues `connection` for the gate's thread; when max_waiting wait, blocks for room (`wait_for_room`) or
  // closes it. Closes it after Stop.
  void enter(std::shared_ptr<HttpConnection> connection, std::chrono::milliseconds first_byte_within,
             bool wait_for_room);
  void wake() const;
  void run();
  // Moves incoming_ to waiting_; false once Stop was called.
  bool take_incoming();
  int poll_timeout_ms(Clock::time_point now) const;
  // Handles one connection after poll: false once it no longer waits (dispatched, answered or closed).
  bool step(Waiting& waiting, bool readable, Clock::time_point now);
  // Reads what the socket holds; false on a socket error.
  bool receive(Waiting& waiting, Clock::time_point now);
  // Frames the request: false once it was dispatched or refused, or can never arrive whole.
  bool examine(Waiting& waiting);
  void leave(std::size_t connections);

  const RequestGateOptions options_;
  const Dispatch dispatch_;
  const int wake_fd_;  // an eventfd: Admit, Return and Stop wake the poll with it

  std::mutex mu_;
  std::condition_variable room_;  // held_ went down, or stopping_ up
  // mu_ guards the following.
  std::vector<Waiting> incoming_;
  std::size_t held_ = 0;  // connections in incoming_ and waiting_ together; at most options_.max_waiting
  bool stopping_ = false;

  std::vector<Waiting> waiting_;  // the gate's thread alone uses it
  std::thread thread_;            // last: it starts once the rest exists
};

}  // namespace memcoord::coordinator
