// coordinator_bench: the coordinator over real gRPC on loopback, printed as JSON.
//   trim_fanout: a coordinator process and N in-process Workers (host backend); `trim --now` repeated;
//     fan-out = command sent to the last ack (coordinator side), and the admin RPC's round trip.
//   ingest: a coordinator process and S raw sessions reporting at H Hz (two pools, three tags each);
//     report-handling latency as the coordinator measures it, and the coordinator's CPU use in cores.
//   http_under_ingest: while that load runs, --scrapes back-to-back GETs of /metrics (as Prometheus scrapes)
//     and of the dashboard's /api/cluster and /api/timeline, timed by the client: p50/p99/max and bytes.
// The coordinator runs in a child process forked before anything touches gRPC, so its CPU time is its own.
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "memcoord/v1/coordinator.grpc.pb.h"
#include "worker/worker.h"

namespace {

using memcoord::coordinator::ClientOptions;
using memcoord::coordinator::CoordinatorClient;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct CoordinatorProcess {
  pid_t pid = -1;
  int stop_fd = -1;  // closing it stops the child
  std::string address;
  int http_port = 0;  // 0: HTTP off
};

// Write ends of earlier children's stop pipes: a later child must close them, or the earlier child never
// sees EOF.
std::vector<int> g_stop_fds;

// Forks a child running a CoordinatorServer on an ephemeral loopback port. REQUIRES: no gRPC use before.
CoordinatorProcess StartCoordinatorProcess(bool http = false) {
  int port_pipe[2], stop_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(stop_pipe) != 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    for (int fd : g_stop_fds) close(fd);
    close(port_pipe[0]);
    close(stop_pipe[1]);
    memcoord::coordinator::CoordinatorOptions options;
    if (http) options.metrics_listen = "127.0.0.1:0";
    auto server = memcoord::coordinator::CoordinatorServer::Start(options);
    const int ports[2] = {server.ok() ? (*server)->port() : 0, server.ok() ? (*server)->metrics_port() : 0};
    if (write(port_pipe[1], ports, sizeof(ports)) != sizeof(ports)) _exit(1);
    char byte;
    while (read(stop_pipe[0], &byte, 1) > 0) {
    }
    if (server.ok()) (*server)->Shutdown();
    _exit(0);
  }
  close(port_pipe[1]);
  close(stop_pipe[0]);
  int ports[2] = {0, 0};
  if (read(port_pipe[0], ports, sizeof(ports)) != sizeof(ports) || ports[0] == 0 || (http && ports[1] == 0)) {
    std::fprintf(stderr, "coordinator_bench: coordinator did not start\n");
    std::exit(1);
  }
  close(port_pipe[0]);
  g_stop_fds.push_back(stop_pipe[1]);
  return {pid, stop_pipe[1], "127.0.0.1:" + std::to_string(ports[0]), ports[1]};
}

void StopCoordinatorProcess(CoordinatorProcess& p) {
  close(p.stop_fd);
  int status = 0;
  waitpid(p.pid, &status, 0);
}

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5)];
}

bool WaitLive(CoordinatorClient& client, int n, milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    auto view = client.GetCluster();
    if (view.ok() && view->stats.live_sessions == static_cast<std::uint64_t>(n)) return true;
    std::this_thread::sleep_for(milliseconds(20));
  }
  return false;
}

nlohmann::json TrimFanout(const std::string& address, int workers_count, int trims) {
  std::vector<std::unique_ptr<memcoord::Worker>> workers;
  for (int r = 0; r < workers_count; ++r) {
    memcoord::WorkerOptions options;
    options.coordinator = address;
    options.backend = "host";
    options.capacity_bytes = 1ull << 30;
    options.report_interval = milliseconds(100);
    options.topology = memcoord::Topology{r, r, workers_count, "bench"};
    auto worker = memcoord::Worker::init(options);
    if (!worker.ok()) return {{"error", worker.status().ToString()}};
    memcoord::PoolOptions po;
    po.name = "default";
    (void)(*worker)->create_pool(po);
    workers.push_back(*std::move(worker));
  }
  ClientOptions co;
  co.address = address;
  CoordinatorClient client(co);
  if (!WaitLive(client, workers_count, milliseconds(20000))) return {{"error", "workers did not attach"}};
  std::vector<double> fanout, rpc;
  int incomplete = 0;
  memcoord::coordinator::TrimSpec spec;
  spec.now = true;
  spec.deadline = milliseconds(2000);
  for (int i = 0; i < trims + 5; ++i) {
    const auto start = SteadyClock::now();
    auto outcome = client.Trim(spec);
    const double rpc_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    if (!outcome.ok() || !outcome->complete) {
      ++incomplete;
      continue;
    }
    if (i < 5) continue;  // warm-up
    fanout.push_back(outcome->fanout_ms);
    rpc.push_back(rpc_ms);
  }
  for (auto& w : workers) w->shutdown();
  return {{"workers", workers_count},
          {"trims", fanout.size()},
          {"incomplete", incomplete},
          {"fanout_p50_ms", Percentile(fanout, 50)},
          {"fanout_p99_ms", Percentile(fanout, 99)},
          {"fanout_max_ms", Percentile(fanout, 100)},
          {"rpc_p50_ms", Percentile(rpc, 50)},
          {"rpc_p99_ms", Percentile(rpc, 99)},
          {"target_p99_ms", 50}};
}

memcoord::v1::WorkerMessage MakeReport(std::int64_t step) {
  memcoord::v1::WorkerMessage m;
  auto* report = m.mutable_report();
  report->set_step(step);
  report->set_device_free_bytes(80ull << 30);
  for (const char* name : {"default", "kv"}) {
    auto* p = report->add_pools();
    p->set_name(name);
    p->set_allocated_bytes(40ull << 30);
    p->set_reserved_bytes(42ull << 30);
    p->set_peak_reserved_bytes(44ull << 30);
    for (const char* tag : {"activations", "optimizer", "gradients"}) {
      auto* t = p->add_tags();
      t->set_tag(tag);
      t->set_live_bytes(10ull << 30);
      t->set_live_blocks(100);
    }
  }
  return m;
}

// `count` raw Attach sessions, 16 per channel (distinct channel args: a connection per channel, as real
// workers have), each registered in a group of its own: the bench measures ingest, not a job-wide abort.
class RawSessions {
 public:
  using Stream = grpc::ClientReaderWriter<memcoord::v1::WorkerMessage, memcoord::v1::CoordinatorMessage>;
  explicit RawSessions(int count) : streams_(static_cast<std::size_t>(count)) {}
  ~RawSessions() {
    for (auto& s : streams_) {
      if (s.context) s.context->TryCancel();
    }
    for (auto& s : streams_) {
      if (s.stream) (void)s.stream->Finish();
    }
  }
  // Opens and registers every session; sessions [0, opened()) may be written meanwhile.
  void open(const std::string& address, int hz) {
    constexpr int kStreamsPerChannel = 16;
    const int count = static_cast<int>(streams_.size());
    for (int i = 0; i < count; ++i) {
      if (i % kStreamsPerChannel == 0) {
        grpc::ChannelArguments args;
        args.SetInt("memcoord.bench.channel", i);
        stubs_.push_back(memcoord::v1::Coordinator::NewStub(
            grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
      }
      Entry& s = streams_[static_cast<std::size_t>(i)];
      s.context = std::make_unique<grpc::ClientContext>();
      s.stream = stubs_.back()->Attach(s.context.get());
      memcoord::v1::WorkerMessage reg;
      reg.mutable_register_()->set_rank(i);
      reg.mutable_register_()->set_world_size(count);
      reg.mutable_register_()->set_host("bench");
      reg.mutable_register_()->set_group("job" + std::to_string(i));
      reg.mutable_register_()->set_report_interval_ms(static_cast<std::uint32_t>(1000 / hz));
      s.stream->Write(reg);
      opened_.store(i + 1, std::memory_order_release);
    }
  }
  int opened() const { return opened_.load(std::memory_order_acquire); }
  Stream& stream(int i) { return *streams_[static_cast<std::size_t>(i)].stream; }

 private:
  struct Entry {
    std::unique_ptr<grpc::ClientContext> context;
    std::unique_ptr<Stream> stream;
  };
  std::vector<std::unique_ptr<memcoord::v1::Coordinator::Stub>> stubs_;
  std::vector<Entry> streams_;
  std::atomic<int> opened_{0};
};

// Four threads writing a report to every open session at `hz`, from the start (a session silent for a few
// intervals would be declared dead); counts reports sent and ticks that ran late.
class ReportWriters {
 public:
  ReportWriters(RawSessions& sessions, int hz) {
    const auto period = std::chrono::microseconds(1000000 / hz);
    for (int t = 0; t < kWriters; ++t) {
      threads_.emplace_back([this, &sessions, period, t] {
        std::int64_t step = 0;
        for (auto tick = SteadyClock::now(); !stop_; tick += period) {
          std::this_thread::sleep_until(tick);
          const auto message = MakeReport(++step);
          for (int i = t; i < sessions.opened(); i += kWriters) {
            if (sessions.stream(i).Write(message)) ++sent;
          }
          if (SteadyClock::now() > tick + period) ++late;
        }
      });
    }
  }
  ~ReportWriters() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& th : threads_) {
      if (th.joinable()) th.join();
    }
  }
  std::atomic<std::uint64_t> sent{0}, late{0};

 private:
  static constexpr int kWriters = 4;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

// The measured window: reports handled, handling latency and the coordinator's CPU use over `seconds`.
nlohmann::json MeasureIngestWindow(CoordinatorProcess& coordinator, CoordinatorClient& client,
                                   ReportWriters& writers, double seconds) {
  const auto before = client.GetCluster();
  const std::uint64_t reports_before = before.ok() ? before->stats.reports : 0;
  const std::uint64_t sent_before = writers.sent.load(), late_before = writers.late.load();
  const double cpu_before = CpuSeconds(coordinator.pid);
  const auto start = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double cpu = CpuSeconds(coordinator.pid) - cpu_before;
  const double wall = std::chrono::duration<double>(SteadyClock::now() - start).count();
  auto after = client.GetCluster();
  nlohmann::json out = {{"duration_s", wall},
                        {"reports_sent", writers.sent.load() - sent_before},
                        {"late_ticks", writers.late.load() - late_before},
                        {"coordinator_cpu_cores", cpu / wall},
                        {"target_p99_us", 10000},
                        {"target_cpu_cores", 1.0}};
  if (after.ok()) {
    out["reports_handled"] = after->stats.reports - reports_before;
    out["live_sessions_at_end"] = after->stats.live_sessions;
    // The coordinator keeps its last 65,536 handling times; with >65k reports in the window these are
    // the window's own (registration-time reports are few).
    out["report_handling_p50_us"] = after->stats.report_handling_p50_us;
    out["report_handling_p99_us"] = after->stats.report_handling_p99_us;
  }
  return out;
}

// `count` back-to-back GETs of `path`, timed from request to the last byte; errors counted apart.
nlohmann::json TimeGets(int port, const std::string& path, int count) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  std::vector<double> ms;
  int errors = 0;
  std::size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    const auto start = SteadyClock::now();
    auto res = http.Get(path.c_str());
    const double elapsed = std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
    if (!res || res->status != 200) {
      ++errors;
      continue;
    }
    bytes = res->body.size();
    ms.push_back(elapsed);
  }
  return {{"path", path},
          {"requests", ms.size()},
          {"errors", errors},
          {"bytes", bytes},
          {"p50_ms", Percentile(ms, 50)},
          {"p99_ms", Percentile(ms, 99)},
          {"max_ms", Percentile(ms, 100)}};
}

// The HTTP side while the ingest load runs: Prometheus scrapes, then the dashboard's two polls.
nlohmann::json HttpUnderLoad(int port, int scrapes) {
  nlohmann::json out = nlohmann::json::array();
  out.push_back(TimeGets(port, "/metrics", scrapes));
  out.push_back(TimeGets(port, "/api/cluster", std::max(1, scrapes / 4)));
  out.push_back(TimeGets(port, "/api/timeline", std::max(1, scrapes / 4)));
  return out;
}

nlohmann::json Ingest(CoordinatorProcess& coordinator, int sessions, int hz, double seconds, int scrapes) {
  RawSessions raw(sessions);
  ReportWriters writers(raw, hz);
  raw.open(coordinator.address, hz);
  ClientOptions co;
  co.address = coordinator.address;
  CoordinatorClient client(co);
  if (!WaitLive(client, sessions, milliseconds(30000))) {
    auto view = client.GetCluster();
    writers.stop();
    return {{"error", "sessions did not all attach within 30 s"},
            {"live_sessions", view.ok() ? view->stats.live_sessions : 0},
            {"reports_sent", writers.sent.load()},
            {"late_ticks", writers.late.load()},
            {"report_handling_p99_us", view.ok() ? view->stats.report_handling_p99_us : 0}};
  }
  nlohmann::json http;
  std::thread scraper;
  if (coordinator.http_port > 0 && scrapes > 0) {
    scraper = std::thread([&] { http = HttpUnderLoad(coordinator.http_port, scrapes); });
  }
  nlohmann::json out = MeasureIngestWindow(coordinator, client, writers, seconds);
  if (scraper.joinable()) scraper.join();  // the load keeps running until the scrapes are done
  writers.stop();
  if (!http.is_null()) out["http_under_ingest"] = http;
  out["sessions"] = sessions;
  out["hz"] = hz;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"coordinator_bench: trim fan-out and report ingest over real gRPC on loopback (JSON)"};
  std::vector<int> fanout_workers = {8, 64};
  int trims = 200;
  int sessions = 1024;
  int hz = 10;
  double seconds = 8.0;  // > 65,536 reports at 1,024 x 10 Hz: the percentiles cover only the window
  int scrapes = 200;
  app.add_option("--fanout-workers", fanout_workers, "worker counts for the trim fan-out")->delimiter(',');
  app.add_option("--trims", trims, "trims per worker count");
  app.add_option("--sessions", sessions, "ingest sessions");
  app.add_option("--hz", hz, "reports per second per session");
  app.add_option("--seconds", seconds, "ingest duration");
  app.add_option("--scrapes", scrapes, "GET /metrics this many times during the ingest (0: HTTP off)");
  CLI11_PARSE(app, argc, argv);
  // Logs go to stdout with spdlog's default sink; keep stdout pure JSON unless asked otherwise.
  setenv("MEMCOORD_LOG_LEVEL", "error", /*overwrite=*/0);
  memcoord::SetUpLogging("coordinator_bench");

  // Both coordinators are forked before this process touches gRPC.
  CoordinatorProcess fanout_coordinator = StartCoordinatorProcess();
  CoordinatorProcess ingest_coordinator = StartCoordinatorProcess(/*http=*/scrapes > 0);
  nlohmann::json result;
  result["trim_fanout"] = nlohmann::json::array();
  for (int n : fanout_workers)
    result["trim_fanout"].push_back(TrimFanout(fanout_coordinator.address, n, trims));
  StopCoordinatorProcess(fanout_coordinator);
  result["ingest"] = Ingest(ingest_coordinator, sessions, hz, seconds, scrapes);
  StopCoordinatorProcess(ingest_coordinator);
  result["machine"] = {{"cpus", std::thread::hardware_concurrency()}, {"transport", "gRPC over 127.0.0.1"}};
  std::cout << result.dump(2) << std::endl;
  return 0;
}
