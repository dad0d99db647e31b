// Slow and odd clients of the HTTP side, live over loopback with real sockets: clients that trickle a request
// a byte at a time, stop halfway or send nothing are cut off at the request deadline or the read stall
// timeout, and meanwhile hold no worker thread, so /metrics answers at once for everyone else. Keep-alive,
// pipelined requests, "Expect: 100-continue" and a client that half-closes after its request still work.
// The servers here use short deadlines (1 s whole request, 500 ms between reads) to keep the tests fast.
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "http_test_client.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::ConnectLoopback;
using memcoord::testing::RawExchange;
using memcoord::testing::ReadToEnd;
using memcoord::testing::SendAll;
using memcoord::testing::StartSecretHttp;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kDeadline{1000};
constexpr milliseconds kStall{500};

HttpServerOptions ShortDeadlines() {
  HttpServerOptions options;
  options.request_deadline = kDeadline;
  options.read_stall_timeout = kStall;
  options.threads = 4;
  return options;
}

// What one slow client saw: how long after connecting the server closed the connection, and what it sent.
struct SlowClientOutcome {
  milliseconds closed_after{-1};  // -1: still open when the client gave up (after 6 s)
  std::string answer;
};

// Connects, then sends `request` one byte every `every` (or nothing once `bytes_to_send` are sent) until the
// server closes the connection.
SlowClientOutcome RunSlowClient(int port, const std::string& request, std::size_t bytes_to_send,
                                milliseconds every) {
  SlowClientOutcome out;
  const int fd = ConnectLoopback(port);
  if (fd < 0) return out;
  const Clock::time_point start = Clock::now();
  std::size_t sent = 0;
  while (Clock::now() - start < std::chrono::seconds(6)) {
    if (sent < bytes_to_send && sent < request.size() && SendAll(fd, request.substr(sent, 1))) ++sent;
    pollfd entry{fd, POLLIN, 0};
    if (::poll(&entry, 1, static_cast<int>(every.count())) <= 0) continue;
    char buffer[4096];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      out.answer.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    out.closed_after = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    break;
  }
  ::close(fd);
  return out;
}

milliseconds TimedMetricsGet(int port, int* status) {
  const Clock::time_point start = Clock::now();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  auto res = client.Get("/metrics");
  *status = res ? res->status : -1;
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
}

TEST(HttpSlowClients, TheDefaultsAreFiveSecondsARequestAndTwoBetweenReadsAndNeitherMayBeZero) {
  EXPECT_EQ(HttpServerOptions{}.request_deadline, milliseconds(5000));
  EXPECT_EQ(HttpServerOptions{}.read_stall_timeout, milliseconds(2000));
  HttpServerOptions zero;
  zero.listen = "127.0.0.1:0";
  zero.read_stall_timeout = milliseconds(0);
  HttpHandlers handlers;
  handlers.snapshot = [] { return ClusterView{}; };
  auto refused = HttpServer::Start(zero, handlers);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

// Six clients trickle "GET /metrics ..." a byte every 100 ms (never a gap the stall timeout cuts) and two
// more say nothing, against 4 worker threads: /metrics answers at once meanwhile, and each trickler is
// answered 408 and closed at the 1 s deadline.
TEST(HttpSlowClients, TricklingClientsAreCutOffAtTheDeadlineWhileMetricsAnswersPromptly) {
  auto server = StartSecretHttp(ShortDeadlines());
  ASSERT_TRUE(server);
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\n\r\n";
  std::vector<SlowClientOutcome> outcomes(8);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const std::size_t bytes = i < 6 ? request.size() : 0;
    clients.emplace_back(
        [&, i, bytes] { outcomes[i] = RunSlowClient(server->port(), request, bytes, milliseconds(100)); });
  }
  std::this_thread::sleep_for(milliseconds(300));  // every slow client is connected and waiting
  for (int i = 0; i < 3; ++i) {
    int status = 0;
    const milliseconds took = TimedMetricsGet(server->port(), &status);
    EXPECT_EQ(status, 200);
    EXPECT_LT(took, milliseconds(2000)) << "GET /metrics " << i << " with 8 slow clients connected";
  }
  for (std::thread& t : clients) t.join();
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_GE(outcomes[i].closed_after, kDeadline - milliseconds(100)) << "trickler " << i;
    EXPECT_LE(outcomes[i].closed_after, kDeadline + milliseconds(2000)) << "trickler " << i;
    EXPECT_EQ(outcomes[i].answer.rfind("HTTP/1.1 408", 0), 0u)
        << "trickler " << i << ": " << outcomes[i].answer;
    EXPECT_NE(outcomes[i].answer.find("did not arrive whole within 1000 ms"), std::string::npos);
  }
  // A client that sends nothing is closed silently after the stall timeout.
  for (std::size_t i = 6; i < 8; ++i) {
    EXPECT_GE(outcomes[i].closed_after, kStall - milliseconds(100)) << "silent client " << i;
    EXPECT_LE(outcomes[i].closed_after, kStall + milliseconds(2000)) << "silent client " << i;
    EXPECT_EQ(outcomes[i].answer, "") << "silent client " << i;
  }
}

TEST(HttpSlowClients, AClientThatStopsHalfwayThroughTheRequestLineIsCutOffAfterTheStall) {
  auto server = StartSecretHttp(ShortDeadlines());
  ASSERT_TRUE(server);
  const int fd = ConnectLoopback(server->port());
  ASSERT_GE(fd, 0);
  const Clock::time_point start = Clock::now();
  ASSERT_TRUE(SendAll(fd, "GET /metr"));
  const std::string answer = ReadToEnd(fd);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
  EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
  EXPECT_EQ(answer.find(memcoord::testing::kClusterMarker), std::string::npos) << answer;
  EXPECT_GE(took, kStall - milliseconds(100));
  EXPECT_LE(took, kStall + milliseconds(2000));
}

TEST(HttpSlowClients, KeepAlivePipelinedRequestsAndHalfClosedClientsAreAnswered) {
  auto server = StartSecretHttp(ShortDeadlines());
  ASSERT_TRUE(server);
  // More requests than one connection serves (5): the client reconnects as told.
  httplib::Client client("127.0.0.1", server->port());
  client.set_keep_alive(true);
  for (int i = 0; i < 7; ++i) {
    auto res = client.Get("/healthz");
    ASSERT_TRUE(res) << i;
    EXPECT_EQ(res->status, 200) << i;
  }
  // Two requests in one write, the first with a body a GET does not read: both are answered, in order.
  const std::string two = RawExchange(server->port(),
                                      "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
                                      "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::size_t first = two.find("HTTP/1.1 200");
  const std::size_t second = two.find("HTTP/1.1 404");
  EXPECT_NE(first, std::string::npos) << two;
  EXPECT_NE(second, std::string::npos) << two;
  EXPECT_LT(first, second) << two;
  // A client that closes its sending side right after its request still gets the answer.
  const int fd = ConnectLoopback(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
  ::shutdown(fd, SHUT_WR);
  const std::string answer = ReadToEnd(fd);
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("memcoord_worker_live"), std::string::npos);
}

TEST(HttpSlowClients, ExpectContinueIsHonouredAndUnacceptableHeadsAreRefusedAtOnce) {
  HttpServerOptions options = ShortDeadlines();
  options.admin_token = "admin-secret";
  auto server = StartSecretHttp(options);
  ASSERT_TRUE(server);
  const int fd = ConnectLoopback(server->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendAll(fd,
                      "POST /api/trim HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-secret\r\n"
                      "Content-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
                      "Connection: close\r\n\r\n"));
  char buffer[256];
  const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);  // before the body: the server asks for it
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buffer, static_cast<std::size_t>(n)).rfind("HTTP/1.1 100 Continue", 0), 0u);
  ASSERT_TRUE(SendAll(fd, "{}"));
  const std::string answer = ReadToEnd(fd);
  ::close(fd);
  EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  EXPECT_NE(answer.find(R"({"complete":true})"), std::string::npos) << answer;

  const Clock::time_point start = Clock::now();
  const std::string chunked = RawExchange(
      server->port(),
      "POST /api/trim HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  EXPECT_EQ(chunked.rfind("HTTP/1.1 411", 0), 0u) << chunked;
  const std::string huge_head = RawExchange(
      server->port(), "GET /metrics HTTP/1.1\r\nX-Filler: " + std::string(40 * 1024, 'a') + "\r\n\r\n");
  EXPECT_EQ(huge_head.rfind("HTTP/1.1 431", 0), 0u) << huge_head.substr(0, 200);
  const std::string bad_length =
      RawExchange(server->port(), "POST /api/trim HTTP/1.1\r\nHost: x\r\nContent-Length: 2x\r\n\r\n{}");
  EXPECT_EQ(bad_length.rfind("HTTP/1.1 400", 0), 0u) << bad_length;
  EXPECT_LT(Clock::now() - start, kStall);  // refused at once, not at a timeout
}

}  // namespace
}  // namespace memcoord::coordinator
