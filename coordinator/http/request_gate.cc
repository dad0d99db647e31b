#include "coordinator/http/request_gate.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

namespace memcoord::coordinator {
namespace {

const char* ReasonPhrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// A whole answer that ends the connection: `status` with {"error": message}.
std::string ClosingAnswer(int status, const std::string& message) {
  const std::string body = nlohmann::json{{"error", message}}.dump();
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Connection: close\r\n\r\n{}",
      status, ReasonPhrase(status), body.size(), body);
}

// Sends what the socket takes now, without waiting: the answers the gate sends are small, and a client
// that does not read them loses them.
void SendNow(int fd, const std::string& text) {
  (void)::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

HttpConnection::~HttpConnection() { ::close(fd); }

Result<std::unique_ptr<RequestGate>> RequestGate::Start(const RequestGateOptions& options,
                                                        Dispatch dispatch) {
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    return Unavailable(fmt::format("the HTTP server cannot make an eventfd: {}", std::strerror(errno)));
  }
  return std::unique_ptr<RequestGate>(new RequestGate(options, std::move(dispatch), wake_fd));
}

RequestGate::RequestGate(const RequestGateOptions& options, Dispatch dispatch, int wake_fd)
    : options_(options), dispatch_(std::move(dispatch)), wake_fd_(wake_fd), thread_([this] { run(); }) {}

RequestGate::~RequestGate() {
  Stop();
  ::close(wake_fd_);
}

void RequestGate::Admit(int fd) {
  auto connection = std::make_shared<HttpConnection>(fd);
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) return;  // closes it
  // httplib writes an answer's head and body apart: without this, Nagle's algorithm holds the body of a
  // kept-alive connection's answer back until the client's delayed ACK (40 ms).
  const int yes = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
  enter(std::move(connection), options_.read_stall, /*wait_for_room=*/true);
}

void RequestGate::Return(std::shared_ptr<HttpConnection> connection) {
  enter(std::move(connection), options_.keep_alive_idle, /*wait_for_room=*/false);
}

void RequestGate::enter(std::shared_ptr<HttpConnection> connection,
                        std::chrono::milliseconds first_byte_within, bool wait_for_room) {
  {
    std::unique_lock lock(mu_);
    if (wait_for_room) room_.wait(lock, [this] { return stopping_ || held_ < options_.max_waiting; });
    if (stopping_ || held_ >= options_.max_waiting) return;  // `connection` closes it, after the unlock
    const Clock::time_point now = Clock::now();
    const bool check_now = !connection->received.empty() || connection->peer_closed;
    incoming_.push_back(
        {std::move(connection), now + options_.request_deadline, now + first_byte_within, check_now, false});
    ++held_;
  }
  wake();
}

void RequestGate::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  room_.notify_all();
  wake();
  if (thread_.joinable()) thread_.join();
}

void RequestGate::wake() const {
  const std::uint64_t one = 1;
  (void)::write(wake_fd_, &one, sizeof(one));
}

void RequestGate::run() {
  std::vector<pollfd> fds;
  while (take_incoming()) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (const Waiting& w : waiting_) fds.push_back({w.connection->fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), poll_timeout_ms(Clock::now())) < 0 && errno != EINTR) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // ENOMEM: the deadlines still apply below
    }
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      (void)::read(wake_fd_, &count, sizeof(count));
    }
    const Clock::time_point now = Clock::now();
    std::size_t left = 0;
    // Backwards, so that moving the last entry into a removed one's place skips nothing.
    for (std::size_t i = waiting_.size(); i-- > 0;) {
      if (step(waiting_[i], fds[i + 1].revents != 0, now)) continue;
      waiting_[i] = std::move(waiting_.back());
      waiting_.pop_back();
      ++left;
    }
    leave(left);
  }
  waiting_.clear();
  std::lock_guard lock(mu_);
  incoming_.clear();
  held_ = 0;
}

bool RequestGate::take_incoming() {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  for (Waiting& w : incoming_) waiting_.push_back(std::move(w));
  incoming_.clear();
  return true;
}

int RequestGate::poll_timeout_ms(Clock::time_point now) const {
  std::optional<Clock::time_point> first;
  for (const Waiting& w : waiting_) {
    if (w.check_now) return 0;
    const Clock::time_point due = std::min(w.deadline, w.stall_deadline);
    if (!first || due < *first) first = due;
  }
  if (!first) return -1;
  if (*first <= now) return 0;
  // Rounded up, so the poll does not wake a moment before the deadline and spin.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(*first - now).count());
}

bool RequestGate::step(Waiting& waiting, bool readable, Clock::time_point now) {
  if (readable && !receive(waiting, now)) return false;
  if (readable || waiting.check_now) {
    waiting.check_now = false;
    if (!examine(waiting)) return false;
  }
  if (now < waiting.deadline && now < waiting.stall_deadline) return true;
  if (!waiting.connection->received.empty()) {
    SendNow(waiting.connection->fd,
            ClosingAnswer(408, fmt::format("the request did not arrive whole within {} ms (at most {} ms "
                                           "between reads); the connection is closed",
                                           options_.request_deadline.count(), options_.read_stall.count())));
  }
  return false;
}

bool RequestGate::receive(Waiting& waiting, Clock::time_point now) {
  HttpConnection& connection = *waiting.connection;
  // Past this much, the framing has refused or completed the request: the rest can stay in the kernel.
  const std::size_t cap = options_.limits.max_head_bytes + options_.limits.max_body_bytes + 1;
  char buffer[16 * 1024];
  while (connection.received.size() < cap) {
    const ssize_t n = ::recv(connection.fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      connection.received.append(buffer, static_cast<std::size_t>(n));
      waiting.stall_deadline = now + options_.read_stall;
    } else if (n == 0) {
      connection.peer_closed = true;
      return true;
    } else if (errno != EINTR) {
      return errno == EAGAIN || errno == EWOULDBLOCK;
    }
  }
  return true;
}

bool RequestGate::examine(Waiting& waiting) {
  HttpConnection& connection = *waiting.connection;
  const RequestFrame frame = FrameRequest(connection.received, options_.limits);
  switch (frame.kind) {
    case RequestFrame::Kind::kComplete:
      dispatch_(std::move(waiting.connection), frame.request_bytes);
      return false;
    case RequestFrame::Kind::kRefused:
      SendNow(connection.fd, ClosingAnswer(frame.status, frame.message));
      return false;
    case RequestFrame::Kind::kIncomplete:
      break;
  }
  if (connection.peer_closed) return false;  // the rest can never arrive
  // A client that asked to be told before it sends the body (RFC 9110 10.1.1) is told here, where the body
  // is read; httplib may send its own "100 Continue" again before the answer, which clients accept (15.2).
  if (frame.head_bytes > 0 && frame.expects_continue && !waiting.sent_continue) {
    SendNow(connection.fd, "HTTP/1.1 100 Continue\r\n\r\n");
    waiting.sent_continue = true;
  }
  return true;
}

void RequestGate::leave(std::size_t connections) {
  if (connections == 0) return;
  {
    std::lock_guard lock(mu_);
    held_ -= connections;
  }
  room_.notify_all();
}

}  // namespace memcoord::coordinator
