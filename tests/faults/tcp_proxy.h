// TcpProxy: a loopback TCP proxy a fault test controls. Every connection accepted on port() is forwarded
// byte for byte to 127.0.0.1:target_port, by one thread polling every socket. stall(true) stops moving
// bytes in both directions: they wait in the socket buffers, so to both ends the peer has simply gone
// silent (a network stall, not a reset); stall(false) resumes. Connections are never closed by a stall.
//
// Thread safety: stall() may be called from any thread. The proxy closes everything when destroyed.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace memcoord::testing {

class TcpProxy {
 public:
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  void stall(bool on) { stalled_ = on; }
  int connections() const { return connections_; }

 private:
  void loop();
  void accept_one();
  // Moves what `from` has to `to`; false when either side closed.
  static bool pump(int from, int to);

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stalled_{false};
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::vector<std::pair<int, int>> pairs_;  // (client, upstream); the proxy thread only
  std::thread thread_;
};

}  // namespace memcoord::testing
