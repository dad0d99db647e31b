// The coordinator's HTTP side, live: a real CoordinatorServer with in-process workers, scraped over HTTP.
// Checks the Prometheus exposition (families, types, labels, escaping, and `promtool check metrics` when
// promtool is installed), the JSON API, the history's events, and that admin actions need the admin token.
// Reads behind a token: http_access_test.cc; slow clients: http_slow_client_test.cc.
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "cli/watch_view.h"
#include "common/bytes.h"
#include "coordinator/http/bounded_task_queue.h"
#include "coordinator/http/cluster_events.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/prometheus_text.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "gtest/gtest.h"
#include "test_support.h"
#include "tests/worker/uuid_backend.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::StartWorker;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

// `admin_token` set: workers attach with the worker token "worker-secret".
std::unique_ptr<CoordinatorServer> StartServerWithHttp(const std::string& admin_token = "") {
  CoordinatorOptions options;
  options.metrics_listen = "127.0.0.1:0";
  options.admin_token = admin_token;
  if (!admin_token.empty()) options.token = "worker-secret";
  return memcoord::testing::StartServer(options);
}

// `token` set: sent as "Authorization: Bearer <token>".
std::string Get(int port, const std::string& path, int* status = nullptr, const std::string& token = "") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  auto res = client.Get(path.c_str(), headers);
  if (status != nullptr) *status = res ? res->status : -1;
  return res ? res->body : std::string();
}

// `request` sent as is over a fresh connection (no client-side encoding); the whole answer, "" on failure.
std::string Raw(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    for (std::size_t sent = 0; sent < request.size();) {
      const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<std::size_t>(n);
    }
    char buffer[4096];
    for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
      answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

// Whether `text` has a sample line of `name` whose labels include every `label="value"` given.
bool HasSample(const std::string& text, const std::string& name, const std::vector<std::string>& labels) {
  std::size_t at = 0;
  while ((at = text.find("\n" + name + "{", at)) != std::string::npos) {
    const std::size_t end = text.find('\n', at + 1);
    const std::string line = text.substr(at + 1, end - at - 1);
    bool all = true;
    for (const std::string& l : labels) all = all && line.find(l) != std::string::npos;
    if (all) return true;
    at = end;
  }
  return false;
}

std::string TypeOf(const std::string& text, const std::string& family) {
  std::smatch m;
  const std::regex re("# TYPE " + family + " (\\w+)");
  return std::regex_search(text, m, re) ? m[1].str() : "";
}

TEST(HttpListen, PortAloneMeansLoopbackAndAHostMustBeGivenToListenWider) {
  auto only_port = ParseHttpListen("9401");
  ASSERT_TRUE(only_port.ok());
  EXPECT_EQ(only_port->host, "127.0.0.1");
  EXPECT_EQ(only_port->port, 9401);
  EXPECT_EQ(ParseHttpListen(":0")->host, "127.0.0.1");
  EXPECT_EQ(ParseHttpListen("localhost:80")->host, "127.0.0.1");
  EXPECT_EQ(ParseHttpListen("0.0.0.0:9401")->host, "0.0.0.0");
  EXPECT_EQ(ParseHttpListen("[::1]:9401")->host, "::1");
  for (const char* bad : {"", "host:", "host:port", "1:70000", "12345678"}) {
    auto parsed = ParseHttpListen(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("HOST:PORT"), std::string::npos) << parsed.status().message();
  }
}

TEST(PrometheusText, EscapesLabelValuesTypesCountersAndCountsASuspectAsHoldingItsRank) {
  ClusterView view;
  WorkerRecord w;
  w.id.rank = 3;
  w.id.host = "we\"ird\\host\nname";
  w.id.device = 1;
  w.id.device_uuid = "GPU-1234";
  w.id.device_total_bytes = 100;
  w.device_free_bytes = 30;
  w.state = WorkerState::kSuspect;
  PoolUsage p;
  p.name = "default";
  p.allocated_bytes = 10;
  p.reserved_bytes = 25;
  p.trims = 2;
  p.trimmed_bytes = 4096;
  p.driver_map_calls = 7;
  p.tags.push_back({"act\"ivations", 10, 1});
  w.pools.push_back(p);
  view.workers.push_back(w);
  view.stats.trim_fanout = HistogramView{{0.001, 0.01}, {1, 2}, 0.012, 3};
  const std::string text = RenderPrometheus(view);

  EXPECT_NE(text.find(R"(host="we\"ird\\host\nname")"), std::string::npos) << text;
  EXPECT_NE(text.find(R"(tag="act\"ivations")"), std::string::npos);
  EXPECT_EQ(TypeOf(text, "memcoord_trimmed_bytes_total"), "counter");
  EXPECT_EQ(TypeOf(text, "memcoord_trims_total"), "counter");
  EXPECT_EQ(TypeOf(text, "memcoord_ooms_total"), "counter");
  EXPECT_EQ(TypeOf(text, "memcoord_driver_map_calls_total"), "counter");
  EXPECT_EQ(TypeOf(text, "memcoord_pool_allocated_bytes"), "gauge");
  EXPECT_EQ(TypeOf(text, "memcoord_trim_fanout_seconds"), "histogram");
  EXPECT_TRUE(HasSample(text, "memcoord_worker_live", {"rank=\"3\""}));
  EXPECT_NE(text.find("gpu=\"1\",gpu_uuid=\"GPU-1234\"} 1\n"), std::string::npos);  // suspect holds its rank
  EXPECT_TRUE(HasSample(text, "memcoord_worker_state", {"state=\"suspect\"} 1"}));
  EXPECT_TRUE(HasSample(text, "memcoord_worker_state", {"state=\"live\"} 0"}));
  EXPECT_TRUE(HasSample(text, "memcoord_device_memory_used_bytes", {"rank=\"3\"", "} 70"}));
  EXPECT_TRUE(HasSample(text, "memcoord_device_memory_free_bytes", {"} 30"}));
  EXPECT_TRUE(HasSample(text, "memcoord_pool_cached_bytes", {"pool=\"default\"} 15"}));
  EXPECT_TRUE(HasSample(text, "memcoord_driver_map_calls_total", {"} 7"}));
  EXPECT_NE(text.find("memcoord_trim_fanout_seconds_bucket{le=\"0.01\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("memcoord_trim_fanout_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(text.find("memcoord_trim_fanout_seconds_count 3\n"), std::string::npos);
  EXPECT_EQ(text.find("memcoord_pool_trimmed_bytes_total"), std::string::npos);  // the old, mistyped name
}

TEST(ClusterEvents, ADiffFindsTrimsQuotaMovesOomsAndDeaths) {
  ClusterView before;
  WorkerRecord w;
  w.id.rank = 0;
  w.session_id = 5;
  PoolUsage p;
  p.name = "default";
  p.limit_bytes = 100;
  w.pools.push_back(p);
  before.workers.push_back(w);
  ClusterView after = before;
  after.workers[0].pools[0].trims = 2;
  after.workers[0].pools[0].trimmed_bytes = 3 * kMiB;
  after.workers[0].pools[0].ooms = 1;
  after.workers[0].pools[0].limit_bytes = 200;
  after.workers[0].state = WorkerState::kDead;
  after.workers[0].dead_reason = "killed";
  std::vector<ClusterEvent> events = DiffClusterViews(before, after, 1000);
  std::map<std::string, ClusterEvent> by_kind;
  for (const ClusterEvent& e : events) by_kind[e.kind] = e;
  ASSERT_EQ(by_kind.size(), 4u) << events.size();
  EXPECT_EQ(by_kind["trim"].bytes, 3 * kMiB);
  EXPECT_EQ(by_kind["trim"].count, 2u);
  EXPECT_EQ(by_kind["oom"].count, 1u);
  EXPECT_EQ(by_kind["quota"].bytes, 200u);
  EXPECT_NE(by_kind["dead"].detail.find("killed"), std::string::npos);
  EXPECT_TRUE(DiffClusterViews(after, after, 2000).empty());
  // A new session restarts the counters: a registration, not a negative trim.
  ClusterView again = before;
  again.workers[0].session_id = 6;
  events = DiffClusterViews(after, again, 3000);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind, "register");
}

class HttpLive : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServerWithHttp("admin-secret");
    ASSERT_TRUE(server_);
    for (int rank = 0; rank < 2; ++rank) {
      workers_.push_back(StartWorker(server_->address(), rank, 2, {"default", "kv\"cache"}, milliseconds(50),
                                     "admin-secret"));
      ASSERT_TRUE(workers_.back());
    }
    for (auto& w : workers_) {
      CachingPool* pool = w->pool("default");
      // The held block first: a miss at the pool's high-water mark may take idle chunks of the other arena,
      // and the 8 MiB of cache are for the trim below.
      held_.push_back(*pool->allocate(kMiB, kDefaultStream, *pool->tag("weights")));
      auto block = pool->allocate(8 * kMiB, kDefaultStream, *pool->tag("activations"));
      ASSERT_TRUE(block.ok());
      ASSERT_TRUE(pool->deallocate(*block).ok());
    }
    // Every rank's report since its allocations: the scrape's per-rank figures (map calls) come from them.
    ASSERT_TRUE(WaitFor(
        [&] {
          ClusterView v = server_->snapshot();
          if (v.workers.size() != 2) return false;
          for (const auto& w : v.workers) {
            const bool reported = std::any_of(w.pools.begin(), w.pools.end(), [](const PoolUsage& p) {
              return p.name == "default" && p.reserved_bytes > 0 && p.driver_map_calls > 0;
            });
            if (!reported) return false;
          }
          return true;
        },
        milliseconds(5000)));
  }
  void TearDown() override {
    for (std::size_t i = 0; i < held_.size() && i < workers_.size(); ++i) {
      (void)workers_[i]->pool("default")->deallocate(held_[i]);
    }
  }
  int port() const { return server_->metrics_port(); }
  // GET with the worker token: this coordinator has tokens, so its data needs one.
  std::string get(const std::string& path, int* status = nullptr) const {
    return Get(port(), path, status, "worker-secret");
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<void*> held_;
};

TEST_F(HttpLive, MetricsScrapeHasEveryFamilyWithRankAndPoolLabels) {
  int status = 0;
  const std::string text = get("/metrics", &status);
  ASSERT_EQ(status, 200);
  for (const char* family :
       {"memcoord_pool_allocated_bytes", "memcoord_pool_reserved_bytes", "memcoord_pool_peak_reserved_bytes",
        "memcoord_pool_limit_bytes", "memcoord_pool_largest_free_bytes", "memcoord_tag_live_bytes",
        "memcoord_trims_total", "memcoord_trimmed_bytes_total", "memcoord_ooms_total",
        "memcoord_driver_map_calls_total", "memcoord_device_memory_used_bytes",
        "memcoord_device_memory_free_bytes", "memcoord_worker_state", "memcoord_trim_fanout_seconds"}) {
    EXPECT_NE(text.find("# TYPE " + std::string(family) + " "), std::string::npos) << family;
  }
  EXPECT_TRUE(
      HasSample(text, "memcoord_pool_allocated_bytes",
                {"rank=\"1\"", "local_rank=\"1\"", "host=\"", "gpu=\"", "gpu_uuid=\"", "pool=\"default\""}));
  EXPECT_TRUE(HasSample(text, "memcoord_pool_reserved_bytes", {R"(pool="kv\"cache")"})) << text;
  EXPECT_TRUE(HasSample(text, "memcoord_tag_live_bytes", {"tag=\"weights\"} 1048576"}));
  // Map calls reach the coordinator: the 8 MiB block needed at least one.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      text, m, std::regex(R"(memcoord_driver_map_calls_total\{rank="0"[^}]*pool="default"\} (\d+))")));
  EXPECT_GE(std::stoull(m[1].str()), 1u);
  EXPECT_TRUE(HasSample(text, "memcoord_worker_state", {"rank=\"0\"", "state=\"live\"} 1"}));
}

TEST_F(HttpLive, PromtoolAcceptsALiveScrape) {
  const std::string text = get("/metrics");
  ASSERT_FALSE(text.empty());
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not installed (Debian package 'prometheus'; .ci/run installs it): the "
                    "exposition was not checked by Prometheus' own linter";
  }
  const std::string path = ::testing::TempDir() + "/memcoord-scrape.prom";
  std::ofstream(path) << text;
  const std::string out_path = path + ".out";
  const int rc = std::system(("promtool check metrics < " + path + " > " + out_path + " 2>&1").c_str());
  std::ifstream in(out_path);
  const std::string report((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << report << "\n--- scrape ---\n" << text;
  EXPECT_EQ(report, "") << "promtool lint findings";
}

TEST_F(HttpLive, JsonApiTimelineAndDashboardAnswer) {
  int status = 0;
  const auto cluster = nlohmann::json::parse(get("/api/cluster", &status));
  ASSERT_EQ(status, 200);
  ASSERT_EQ(cluster["workers"].size(), 2u);
  EXPECT_EQ(cluster["workers"][0]["pools"][0]["name"], "default");
  EXPECT_GT(cluster["workers"][0]["pools"][0]["reserved_bytes"].get<std::uint64_t>(), 0u);

  ASSERT_TRUE(WaitFor(
      [&] {
        const auto tl = nlohmann::json::parse(get("/api/timeline"));
        return tl["ranks"].size() == 2 && tl["ranks"][1]["samples"].size() >= 2;
      },
      milliseconds(5000)));
  const auto one = nlohmann::json::parse(get("/api/timeline?ranks=1"));
  ASSERT_EQ(one["ranks"].size(), 1u);
  EXPECT_EQ(one["ranks"][0]["rank"], 1);
  EXPECT_EQ(one["ranks"][0]["samples"][0].size(), 5u);  // t, allocated, reserved, limit, device free
  get("/api/timeline?ranks=x", &status);
  EXPECT_EQ(status, 400);

  const std::string page = get("/", &status);
  EXPECT_EQ(status, 200);
  EXPECT_NE(page.find("<title>memcoord</title>"), std::string::npos);
  EXPECT_NE(page.find("id=\"timelines\""), std::string::npos);
  const auto missing = nlohmann::json::parse(get("/nope", &status));
  EXPECT_EQ(status, 404);
  EXPECT_NE(missing["error"].get<std::string>().find("/metrics"), std::string::npos);
}

// Requests no browser sends: each gets a clear 4xx and the coordinator serves on.
TEST_F(HttpLive, BadRequestsGetClearErrorsAndTheServerServesOn) {
  // A path that is not UTF-8: its 404 message used to make the JSON dump throw outside httplib's try/catch.
  std::string answer = Raw(port(), "GET /%ff%fe HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 404"), std::string::npos) << answer;
  EXPECT_NE(answer.find("no such path"), std::string::npos) << answer;
  // A body far past what any endpoint takes is refused before it is read whole (and before the auth check).
  answer = Raw(port(),
               "POST /api/trim HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1073741824\r\n"
               "Content-Type: application/json\r\n\r\n{");
  EXPECT_NE(answer.find("HTTP/1.1 413"), std::string::npos) << answer;
  int status = 0;
  get("/api/timeline?ranks=%ff", &status);
  EXPECT_EQ(status, 400);
  const std::string bad_since = get("/api/events?since=abc", &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(bad_since.find("since must be a whole number, got 'abc'"), std::string::npos) << bad_since;
  get("/api/timeline?ranks=5x", &status);
  EXPECT_EQ(status, 400);
  // One rank named 1,500 times is one rank's series, not 1,500 copies.
  std::string many = "/api/timeline?ranks=0";
  for (int i = 0; i < 1499; ++i) many += ",0";
  const std::string body = get(many, &status);
  ASSERT_EQ(status, 200) << body.substr(0, 300);
  const auto timeline = nlohmann::json::parse(body);
  EXPECT_EQ(timeline["ranks"].size(), 1u);
  // A path served with another method is 405 naming the method to use.
  answer = Raw(port(), "DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 405"), std::string::npos) << answer;
  EXPECT_NE(answer.find("Allow: GET"), std::string::npos) << answer;
  answer = Raw(port(), "GET /api/trim HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_NE(answer.find("HTTP/1.1 405"), std::string::npos) << answer;
  EXPECT_NE(answer.find("use POST"), std::string::npos) << answer;
  EXPECT_EQ(get("/healthz", &status), "ok\n");
  EXPECT_TRUE(server_->snapshot().workers.size() == 2);
}

TEST_F(HttpLive, TrimNeedsTheAdminTokenAndShowsUpAsEventsCountersAndFanout) {
  httplib::Client client("127.0.0.1", port());
  auto refused = client.Post("/api/trim", "{}", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(client.Get("/api/session")->status, 401);  // this coordinator's reads need a token too
  auto session = client.Get("/api/session", {{"Authorization", "Bearer worker-secret"}});
  ASSERT_EQ(session->status, 200);
  EXPECT_EQ(nlohmann::json::parse(session->body)["admin"], false);
  auto worker_token =
      client.Post("/api/trim", {{"Authorization", "Bearer worker-secret"}}, "{}", "application/json");
  EXPECT_EQ(worker_token->status, 401);  // the worker token is not the admin's

  // The history diffs successive samples: both ranks must have been sampled once before the trim.
  ASSERT_TRUE(WaitFor([&] { return nlohmann::json::parse(get("/api/timeline"))["ranks"].size() == 2; },
                      milliseconds(5000)));
  httplib::Headers admin = {{"Authorization", "Bearer admin-secret"}};
  EXPECT_EQ(nlohmann::json::parse(client.Get("/api/session", admin)->body)["admin"], true);
  httplib::Headers lower = {{"Authorization", "bearer admin-secret"}};  // the scheme's case does not matter
  EXPECT_EQ(nlohmann::json::parse(client.Get("/api/session", lower)->body)["admin"], true);
  httplib::Headers other_case = {{"Authorization", "Bearer ADMIN-SECRET"}};  // the token's does
  EXPECT_EQ(client.Get("/api/session", other_case)->status, 401);  // no token this coordinator knows
  EXPECT_EQ(client.Post("/api/trim", other_case, "{}", "application/json")->status, 401);
  auto bad = client.Post("/api/trim", admin, "[1]", "application/json");
  EXPECT_EQ(bad->status, 400);
  auto trimmed = client.Post("/api/trim", admin, "{}", "application/json");
  ASSERT_TRUE(trimmed);
  ASSERT_EQ(trimmed->status, 200) << trimmed->body;
  const auto outcome = nlohmann::json::parse(trimmed->body);
  EXPECT_TRUE(outcome["complete"].get<bool>());
  EXPECT_GE(outcome["released_bytes"].get<std::uint64_t>(), 2 * 7 * kMiB);

  ASSERT_TRUE(WaitFor(
      [&] {
        const auto events = nlohmann::json::parse(get("/api/events"));
        int released = 0;  // ranks whose default pool released its 8 MiB of cache
        for (const auto& e : events) {
          released +=
              e["kind"] == "trim" && e["pool"] == "default" && e["bytes"].get<std::uint64_t>() >= 7 * kMiB;
        }
        return released == 2;
      },
      milliseconds(5000)))
      << get("/api/events");
  const std::string text = get("/metrics");
  EXPECT_NE(text.find("memcoord_trim_fanout_seconds_count 1\n"), std::string::npos);
  EXPECT_TRUE(HasSample(text, "memcoord_trims_total", {"rank=\"0\"", "pool=\"default\"} 1"}));
}

// A worker's GPU UUID (DeviceInfo::uuid, sent in its Register) is the `gpu_uuid` label of every series of
// that rank, as dcgm-exporter's `UUID` label names the same GPU; a worker without a GPU has an empty one.
TEST(HttpWorkerLabels, AWorkersGpuUuidIsItsGpuUuidLabelAndEmptyWithoutAGpu) {
  auto server = StartServerWithHttp();
  ASSERT_TRUE(server);
  const std::string uuid = "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5";
  WorkerOptions options;
  options.coordinator = server->address();
  options.report_interval = milliseconds(50);
  options.topology = Topology{0, 0, 2, "test"};
  options.backend_factory = memcoord::testing::UuidBackend::Factory(uuid);
  auto with_gpu = Worker::init(options);
  ASSERT_TRUE(with_gpu.ok()) << with_gpu.status().ToString();
  ASSERT_TRUE((*with_gpu)->device_pool(-1).ok());
  auto without = StartWorker(server->address(), 1, 2, {"default"});
  ASSERT_TRUE(without);
  ASSERT_TRUE(WaitFor(
      [&] {
        const ClusterView v = server->snapshot();
        return v.workers.size() == 2 && !v.workers[0].pools.empty() && !v.workers[1].pools.empty();
      },
      milliseconds(5000)));

  const std::string text = Get(server->metrics_port(), "/metrics");
  EXPECT_TRUE(HasSample(text, "memcoord_worker_live", {"rank=\"0\"", "gpu_uuid=\"" + uuid + "\"} 1"}))
      << text;
  EXPECT_TRUE(HasSample(text, "memcoord_pool_reserved_bytes",
                        {"rank=\"0\"", "gpu_uuid=\"" + uuid + "\"", "pool=\"default\""}));
  EXPECT_TRUE(HasSample(text, "memcoord_worker_live", {"rank=\"1\"", "gpu_uuid=\"\"} 1"})) << text;
  const auto cluster = nlohmann::json::parse(Get(server->metrics_port(), "/api/cluster"));
  ASSERT_EQ(cluster["workers"].size(), 2u);
  for (const auto& w : cluster["workers"]) {
    EXPECT_EQ(w["device_uuid"], w["rank"] == 0 ? uuid : "") << w.dump();
  }
}

TEST(HttpAdmin, WithoutAnAdminTokenTheHttpSideIsReadOnly) {
  auto server = StartServerWithHttp();
  ASSERT_TRUE(server);
  httplib::Client client("127.0.0.1", server->metrics_port());
  auto res = client.Post("/api/trim", {{"Authorization", "Bearer "}}, "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("no admin token"), std::string::npos);
}

// Requests beyond the queue are served by the caller (the RequestGate's thread) itself, which reads nothing
// meanwhile: a flood ends up waiting in the kernel's backlog instead of taking every descriptor of the
// process.
TEST(BoundedTaskQueue, PastTheQueueTheCallerServesTheConnectionItself) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> ran{0}, started{0};
  BoundedTaskQueue queue(1, 2);
  const auto blocked = [&] {
    ++started;
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return release; });
    ++ran;
  };
  queue.enqueue(blocked);  // the worker takes it and blocks
  ASSERT_TRUE(WaitFor([&] { return started.load() == 1; }, milliseconds(5000)));
  queue.enqueue(blocked);
  queue.enqueue(blocked);  // two queued: the queue is full
  std::thread::id ran_on;
  queue.enqueue([&] {
    ran_on = std::this_thread::get_id();
    ++ran;
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());  // run here, before enqueue returned
  EXPECT_EQ(queue.ran_on_caller(), 1u);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  queue.shutdown();  // what was queued still runs
  EXPECT_EQ(ran.load(), 4);
}

TEST(HttpServer, ABusyPortIsAClearError) {
  auto first = StartServerWithHttp();
  ASSERT_TRUE(first);
  CoordinatorOptions options;
  options.metrics_listen = "127.0.0.1:" + std::to_string(first->metrics_port());
  auto second = CoordinatorServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("cannot listen for HTTP"), std::string::npos);
}

TEST(WatchScreen, SixtyFourRanksFitA160By50TerminalWithEvents) {
  ClusterView view;
  for (int rank = 0; rank < 64; ++rank) {
    WorkerRecord w;
    w.id.rank = rank;
    w.id.device_total_bytes = 80 * kGiB;
    w.device_free_bytes = 20 * kGiB;
    w.state = rank == 7 ? WorkerState::kDead : rank == 9 ? WorkerState::kSuspect : WorkerState::kLive;
    w.dead_reason = "session stream broke";
    PoolUsage p;
    p.allocated_bytes = 40 * kGiB;
    p.reserved_bytes = 55 * kGiB;
    p.limit_bytes = 70 * kGiB;
    w.pools.push_back(p);
    view.workers.push_back(w);
  }
  std::deque<ClusterEvent> events;
  for (int i = 0; i < 20; ++i) events.push_back({1000, i, "trim", "default", kGiB, 1, "trim released 1 GiB"});
  events.push_back({2000, 7, "dead", "", 0, 1, "rank 7 dead: session stream broke"});
  const std::string screen = cli::RenderWatchScreen(view, events, 160, 50);
  EXPECT_EQ(screen.rfind("\033[H", 0), 0u);  // redraws from the top left, in place
  std::vector<std::string> lines;
  std::stringstream in(screen);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  EXPECT_LE(lines.size(), 51u);  // 50 rows, and the final "erase below"
  for (const std::string& line : lines) EXPECT_LE(line.size(), 160u + 3u) << line;  // + "erase line"
  for (int rank = 0; rank < 64; ++rank) {
    EXPECT_TRUE(std::regex_search(screen, std::regex("(^|\\s)" + std::to_string(rank) + " (live|SUSP|DEAD)")))
        << "rank " << rank << " missing:\n"
        << screen;
  }
  // 30 cells of 80 GiB: 40 allocated, 15 more cached, 5 used elsewhere, 20 free, the limit at 70.
  EXPECT_NE(screen.find("[###############====== ....|...]"), std::string::npos) << screen;
  EXPECT_NE(screen.find("rank 7 dead"), std::string::npos);  // the latest event is shown
  EXPECT_EQ(screen.find("more ranks"), std::string::npos);
}

}  // namespace
}  // namespace memcoord::coordinator
