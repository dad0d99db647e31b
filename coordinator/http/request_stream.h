// RequestStream: the httplib::Stream through which a worker thread serves one request that RequestGate
// (request_gate.h) has already received whole. Reads come from those bytes only, never from the socket, so
// no client can hold a worker by sending slowly: past the request's end a read returns 0 (end of input).
// Writes go to the (non-blocking) socket; each waits at most `write_stall` for the client to make room, and
// none goes on past `deadline`, so a client that does not read its answer holds a worker at most that long.
// Not thread-safe (one worker uses it); does not own the socket, which must outlive it.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace memcoord::coordinator {

class RequestStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  // `request` must outlive the stream.
  RequestStream(int fd, std::string_view request, Clock::time_point deadline,
                std::chrono::milliseconds write_stall);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, std::size_t size) override;
  // All `size` bytes, or -1 (the client stalled past write_stall, the deadline passed, or it is gone).
  ssize_t write(const char* ptr, std::size_t size) override;
  using httplib::Stream::write;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override;

 private:
  // Waits until the socket can take bytes: false after write_stall, at the deadline, or on an error.
  bool wait_writable() const;

  const int fd_;
  const std::string_view request_;
  std::size_t read_ = 0;  // bytes of request_ handed out
  const Clock::time_point deadline_;
  const std::chrono::milliseconds write_stall_;
};

}  // namespace memcoord::coordinator
