// Integration tests of the coordinator over real gRPC on loopback: an in-process CoordinatorServer on an
// ephemeral port, in-process Workers (host backend) and raw Attach streams for misbehaving peers.
#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/bytes.h"
#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "memcoord/v1/coordinator.grpc.pb.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::FindRank;
using memcoord::testing::LiveCount;
using memcoord::testing::StartServer;
using memcoord::testing::StartWorker;
using memcoord::testing::WaitFor;
using memcoord::testing::WaitForPools;
using std::chrono::milliseconds;

CoordinatorClient Client(const CoordinatorServer& server, const std::string& token = "") {
  ClientOptions options;
  options.address = server.address();
  options.token = token;
  return CoordinatorClient(options);
}

// Runs steps on a worker from its own thread: each step allocates and frees `bytes` in every pool (so a
// trim finds cache to release), then sleeps step_ms.
class Trainer {
 public:
  Trainer(Worker& worker, std::vector<std::string> pools, std::size_t bytes, int step_ms)
      : thread_([this, &worker, pools, bytes, step_ms] {
          while (!stop_) {
            worker.step_begin();
            for (const auto& name : pools) {
              CachingPool* pool = worker.pool(name);
              auto block = pool->allocate(bytes);
              if (block.ok()) (void)pool->deallocate(*block);
            }
            std::this_thread::sleep_for(milliseconds(step_ms));
            (void)worker.step_end();
          }
        }) {}
  ~Trainer() {
    stop_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A raw session for a misbehaving or silent peer.
struct RawSession {
  explicit RawSession(const std::string& address)
      : stub(v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        stream(stub->Attach(&context)) {}
  ~RawSession() {
    context.TryCancel();
    if (!finished) (void)stream->Finish();
  }
  bool register_rank(int rank, int world, std::uint32_t interval_ms, const std::string& group = "world") {
    v1::WorkerMessage m;
    m.mutable_register_()->set_rank(rank);
    m.mutable_register_()->set_world_size(world);
    m.mutable_register_()->set_host("raw");
    m.mutable_register_()->set_report_interval_ms(interval_ms);
    m.mutable_register_()->set_group(group);
    return stream->Write(m);
  }
  // Reads until the stream ends; returns the final status.
  grpc::Status finish() {
    v1::CoordinatorMessage m;
    while (stream->Read(&m)) {
    }
    finished = true;
    return stream->Finish();
  }
  bool finished = false;
  std::unique_ptr<v1::Coordinator::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
};

TEST(CoordinatorService, WorkersRegisterAndReport) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int r = 0; r < 3; ++r) workers.push_back(StartWorker(server->address(), r, 3, {"default", "kv"}));
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = client.GetCluster();
        if (!view.ok() || LiveCount(*view) != 3) return false;
        for (const auto& w : view->workers) {
          if (w.reports < 2) return false;
        }
        return true;
      },
      milliseconds(3000)));
  auto view = client.GetCluster();
  ASSERT_TRUE(view.ok());
  for (int r = 0; r < 3; ++r) {
    const WorkerRecord* w = FindRank(*view, r);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->id.world_size, 3);
    EXPECT_EQ(w->id.backend, "host");
    EXPECT_EQ(w->id.pid, ::getpid());
    ASSERT_EQ(w->pools.size(), 2u);
    EXPECT_EQ(w->pools[0].name, "default");
  }
  EXPECT_EQ(view->stats.live_sessions, 3u);
  EXPECT_GT(view->stats.reports, 0u);
  for (auto& w : workers) EXPECT_TRUE(w->attached());
}

// `ranks` attached workers, each training in its own thread on `pools` (8 MiB allocated and freed in each
// pool per step, rank r stepping every 5 + 3r ms), once every rank is live and the last has made 3 steps.
struct TrainingCluster {
  TrainingCluster(int ranks, const std::vector<std::string>& pools) : server(StartServer()) {
    if (!server) return;
    for (int r = 0; r < ranks; ++r) {
      workers.push_back(StartWorker(server->address(), r, ranks, pools));
      trainers.push_back(std::make_unique<Trainer>(*workers.back(), pools, 8 * kMiB, 5 + 3 * r));
    }
    auto client = Client(*server);
    ready = WaitFor(
                [&] {
                  auto v = client.GetCluster();
                  return v.ok() && LiveCount(*v) == ranks;
                },
                milliseconds(3000)) &&
            WaitFor([&] { return workers.back()->step() >= 3; }, milliseconds(3000));
  }
  std::unique_ptr<coordinator::CoordinatorServer> server;
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::unique_ptr<Trainer>> trainers;
  bool ready = false;
};

TEST(CoordinatorService, SynchronizedTrimRunsAtTheSameStepOnEveryRank) {
  TrainingCluster cluster(3, {"default"});
  ASSERT_TRUE(cluster.ready);
  auto outcome = Client(*cluster.server).Trim(TrimSpec{});
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(outcome->complete);
  EXPECT_GT(outcome->step, 0);
  ASSERT_EQ(outcome->acks.size(), 3u);
  for (const RankAck& a : outcome->acks) {
    EXPECT_EQ(a.step, outcome->step) << "rank " << a.rank;
    EXPECT_EQ(a.code, 0);
    EXPECT_GE(a.released_bytes, 8 * kMiB) << "rank " << a.rank;
  }
  EXPECT_GE(outcome->released_bytes, 24 * kMiB);
  cluster.trainers.clear();
  // The workers' own record agrees: the trim ran at the end of step S.
  for (auto& w : cluster.workers) {
    auto applied = w->applied_commands();
    ASSERT_EQ(applied.size(), 1u);
    EXPECT_EQ(applied[0].requested_step, outcome->step);
    EXPECT_EQ(applied[0].step, outcome->step);
  }
}

// A synchronized trim of one pool waits for its step among the worker's pending commands, and still trims
// that pool only (the wait used to move the command onto itself, which emptied its pool name).
TEST(CoordinatorService, SynchronizedTrimOfOnePoolLeavesTheOthers) {
  TrainingCluster cluster(2, {"default", "kv"});
  ASSERT_TRUE(cluster.ready);
  TrimSpec spec;
  spec.pool = "kv";
  auto outcome = Client(*cluster.server).Trim(spec);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(outcome->complete);
  cluster.trainers.clear();
  for (auto& w : cluster.workers) {
    auto applied = w->applied_commands();
    ASSERT_EQ(applied.size(), 1u);
    EXPECT_EQ(applied[0].step, outcome->step);
    EXPECT_GE(w->pool("default")->stats().reserved_bytes, 8 * kMiB);  // untouched
    EXPECT_GE(w->pool("kv")->stats().trims, 1u);
    EXPECT_EQ(w->pool("default")->stats().trims, 0u);
  }
}

TEST(CoordinatorService, TrimNowReleasesCacheOfIdleWorkers) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"default"});
  CachingPool* pool = worker->pool("default");
  auto block = pool->allocate(16 * kMiB);
  ASSERT_TRUE(block.ok());
  ASSERT_TRUE(pool->deallocate(*block).ok());
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));
  TrimSpec spec;
  spec.now = true;
  auto outcome = client.Trim(spec);
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_TRUE(outcome->complete);
  EXPECT_EQ(outcome->step, -1);
  EXPECT_GE(outcome->released_bytes, 16 * kMiB);
  EXPECT_EQ(pool->stats().reserved_bytes, 0u);
}

TEST(CoordinatorService, TrimWithASilentWorkerEndsAtTheDeadlineNamingIt) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 2, {"default"});
  RawSession silent(server->address());
  ASSERT_TRUE(silent.register_rank(1, 2, 60000));  // never reports, never acks, not yet declared dead
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && LiveCount(*v) == 2;
      },
      milliseconds(3000)));
  TrimSpec spec;
  spec.now = true;
  spec.deadline = milliseconds(300);
  const auto start = std::chrono::steady_clock::now();
  auto outcome = client.Trim(spec);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_FALSE(outcome->complete);
  EXPECT_EQ(outcome->missing_ranks, std::vector<int>{1});
  ASSERT_EQ(outcome->acks.size(), 1u);
  EXPECT_EQ(outcome->acks[0].rank, 0);
  EXPECT_LT(elapsed, milliseconds(2000));
}

TEST(CoordinatorService, SilentWorkerIsDeclaredDeadAndItsGroupAborted) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<Worker>> workers;
  std::atomic<int> hooks{0};
  for (int r = 0; r < 2; ++r) {
    workers.push_back(StartWorker(server->address(), r, 3, {"default"}));
    workers.back()->on_abort([&hooks](const std::string&) { ++hooks; });
  }
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor([&] { return workers[0]->attached() && workers[1]->attached(); }, milliseconds(3000)));
  RawSession silent(server->address());
  ASSERT_TRUE(silent.register_rank(2, 3, 50));
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && LiveCount(*v) == 3;
      },
      milliseconds(3000)));
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && FindRank(*v, 2) && FindRank(*v, 2)->state == WorkerState::kSuspect;
      },
      milliseconds(2000)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(150 + 300));  // 3 x 50 ms + sweep + slack
  EXPECT_EQ(hooks.load(), 0);                                                    // suspect aborts nobody
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && FindRank(*v, 2) && FindRank(*v, 2)->state == WorkerState::kDead;
      },
      milliseconds(6000)));
  const auto detected = std::chrono::steady_clock::now() - start;
  EXPECT_GE(detected, milliseconds(2500));  // dead only after the 3 s grace without a report
  EXPECT_LT(detected, milliseconds(4500));
  auto view = client.GetCluster();
  EXPECT_NE(FindRank(*view, 2)->dead_reason.find("silent"), std::string::npos);
  ASSERT_TRUE(WaitFor([&] { return hooks.load() == 2; }, milliseconds(2000)));
  for (auto& w : workers) {
    ASSERT_TRUE(w->abort_reason().has_value());
    EXPECT_NE(w->abort_reason()->find("rank 2"), std::string::npos) << *w->abort_reason();
  }
  // A hook set after the abort came is called at once, on this thread.
  int late_hooks = 0;
  workers[0]->on_abort([&late_hooks](const std::string& reason) {
    late_hooks += reason.find("rank 2") != std::string::npos ? 1 : 100;
  });
  workers[1]->on_abort_info(
      [&late_hooks](const AbortInfo& info) { late_hooks += info.dead_rank == 2 ? 1 : 100; });
  EXPECT_EQ(late_hooks, 2);
  // The silent worker's stream was cancelled by the coordinator.
  EXPECT_FALSE(silent.finish().ok());
}

// A port one coordinator serves is not served by a second (gRPC's default SO_REUSEPORT let both listen and
// split the workers and clients between them).
TEST(CoordinatorService, ASecondCoordinatorCannotTakeAPortInUse) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:" + std::to_string(server->port());
  auto second = coordinator::CoordinatorServer::Start(options);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("address in use"), std::string::npos) << second.status().message();
  EXPECT_TRUE(Client(*server).GetCluster().ok());  // the first serves on
}

TEST(CoordinatorService, BadRequestsGetTheRightCodeAndLoseNoState) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 2, {"default"});
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));
  ASSERT_TRUE(WaitForPools(client, 0, 1));

  auto unknown_rank = client.SetQuota(7, "default", 1 << 20);
  EXPECT_EQ(unknown_rank.status().code(), StatusCode::kNotFound);
  EXPECT_NE(unknown_rank.status().message().find("rank 7"), std::string::npos);
  auto negative = client.SetQuota(0, "default", -5);
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("-5"), std::string::npos);
  auto absurd = client.SetQuota(0, "default", std::int64_t{1} << 60);
  EXPECT_EQ(absurd.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(absurd.status().message().find("absurd"), std::string::npos);
  auto unknown_pool = client.SetQuota(0, "nope", 1 << 20);
  EXPECT_EQ(unknown_pool.status().code(), StatusCode::kNotFound);
  TrimSpec long_trim;
  long_trim.deadline = milliseconds(10'000'000);
  EXPECT_EQ(client.Trim(long_trim).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(client.Get("", 0).status().code(), StatusCode::kInvalidArgument);

  {  // A second worker claiming the live rank 0.
    RawSession second(server->address());
    ASSERT_TRUE(second.register_rank(0, 2, 100));
    grpc::Status status = second.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
    EXPECT_NE(status.error_message().find("rank 0"), std::string::npos) << status.error_message();
  }
  {  // Rank outside the world.
    RawSession outside(server->address());
    ASSERT_TRUE(outside.register_rank(5, 2, 100));
    EXPECT_EQ(outside.finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {  // A session that does not start with Register.
    RawSession malformed(server->address());
    v1::WorkerMessage report;
    report.mutable_report()->set_step(1);
    ASSERT_TRUE(malformed.stream->Write(report));
    grpc::Status status = malformed.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("Register"), std::string::npos);
  }
  // The coordinator kept running and lost nothing: the real rank 0 is still live, on its first session.
  auto view = client.GetCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(view->workers.size(), 1u);
  EXPECT_EQ(LiveCount(*view), 1);
  EXPECT_TRUE(worker->attached());
  EXPECT_EQ(worker->registrations(), 1u);
  auto ok = client.SetQuota(0, "default", 64 << 20);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(worker->pool("default")->stats().limit_bytes, 64u << 20);
}

TEST(CoordinatorService, TokenIsRequiredWhenConfigured) {
  CoordinatorOptions options;
  options.token = "s3cret";
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto anonymous = Client(*server).GetCluster();
  EXPECT_EQ(anonymous.status().code(), StatusCode::kUnauthenticated);
  auto wrong = Client(*server, "guess").GetCluster();
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  auto worker = StartWorker(server->address(), 0, 1, {"default"}, milliseconds(50), "s3cret");
  auto intruder = StartWorker(server->address(), 0, 1, {"default"}, milliseconds(50), "");
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));
  auto view = Client(*server, "s3cret").GetCluster();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ(view->workers.size(), 1u);
  EXPECT_FALSE(intruder->attached());
}

TEST(CoordinatorService, RestartedCoordinatorSeesEveryWorkerReattachWithinTwoSeconds) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const int port = server->port();
  std::vector<std::unique_ptr<Worker>> workers;
  for (int r = 0; r < 4; ++r) workers.push_back(StartWorker(server->address(), r, 4, {"default"}));
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& w : workers) {
          if (!w->attached()) return false;
        }
        return true;
      },
      milliseconds(3000)));
  const std::string first_id = workers[0]->coordinator_id();
  server->Shutdown();
  server.reset();
  CoordinatorOptions options;
  options.listen = "127.0.0.1:" + std::to_string(port);
  auto restarted = StartServer(options);
  ASSERT_TRUE(restarted);
  const auto start = std::chrono::steady_clock::now();
  auto client = Client(*restarted);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && LiveCount(*v) == 4;
      },
      milliseconds(2000)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(2000));
  // The coordinator counts a worker live before the worker has read its Registered reply.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (auto& w : workers) {
          if (w->registrations() != 2) return false;
        }
        return true;
      },
      milliseconds(1000)));
  for (auto& w : workers) {
    EXPECT_EQ(w->registrations(), 2u);
    EXPECT_NE(w->coordinator_id(), first_id);
  }
}

TEST(CoordinatorService, QuotaMovesTowardThePoolUnderPressure) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"a", "b"});
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));
  ASSERT_TRUE(WaitForPools(client, 0, 2));
  auto split = client.SetQuota(0, "", 64 * kMiB);  // the device budget, split between a and b
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->size(), 2u);
  CachingPool* a = worker->pool("a");
  CachingPool* b = worker->pool("b");
  EXPECT_EQ(a->stats().limit_bytes, 32 * kMiB);
  EXPECT_EQ(b->stats().limit_bytes, 32 * kMiB);
  // a holds 24 MiB of idle cache; b needs 40 MiB live.
  auto cached = a->allocate(24 * kMiB);
  ASSERT_TRUE(cached.ok());
  ASSERT_TRUE(a->deallocate(*cached).ok());
  auto first = b->allocate(20 * kMiB);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && v->workers.size() == 1 && v->workers[0].pools.size() == 2 &&
               v->workers[0].pools[1].allocated_bytes >= 20 * kMiB;
      },
      milliseconds(2000)));
  auto second = b->allocate(20 * kMiB);  // over b's 32 MiB: the OOM hook asks the coordinator
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_GE(b->stats().limit_bytes, 40 * kMiB);
  ASSERT_TRUE(WaitFor([&] { return a->stats().limit_bytes <= 24 * kMiB; }, milliseconds(2000)));
  EXPECT_LE(a->stats().reserved_bytes, a->stats().limit_bytes);
  EXPECT_LE(a->stats().limit_bytes + b->stats().limit_bytes, 64 * kMiB);
  // Beyond the budget: nothing idle is left, so the allocation fails and names the quota.
  auto too_much = b->allocate(40 * kMiB);
  EXPECT_FALSE(too_much.ok());
  (void)b->deallocate(*first);
  (void)b->deallocate(*second);
}

TEST(CoordinatorService, QuotaMovesToAPoolNearItsLimitBeforeItRunsOut) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"a", "b"});
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));
  ASSERT_TRUE(WaitForPools(client, 0, 2));
  ASSERT_TRUE(client.SetQuota(0, "", 64 * kMiB).ok());
  CachingPool* a = worker->pool("a");
  CachingPool* b = worker->pool("b");
  ASSERT_EQ(b->stats().limit_bytes, 32 * kMiB);
  auto idle = a->allocate(16 * kMiB);  // a: 16 MiB of idle cache
  ASSERT_TRUE(idle.ok());
  ASSERT_TRUE(a->deallocate(*idle).ok());
  auto hot = b->allocate(30 * kMiB);  // b: 94% of its quota, still within it
  ASSERT_TRUE(hot.ok());
  ASSERT_TRUE(WaitFor([&] { return b->stats().limit_bytes > 32 * kMiB; }, milliseconds(3000)));
  EXPECT_LT(a->stats().limit_bytes, 32 * kMiB);
  EXPECT_LE(a->stats().reserved_bytes, a->stats().limit_bytes);
  EXPECT_LE(a->stats().limit_bytes + b->stats().limit_bytes, 64 * kMiB);
  EXPECT_EQ(b->stats().ooms, 0u);  // moved ahead of need, not after a failure
  (void)b->deallocate(*hot);
}

TEST(CoordinatorService, LeakWatchFlagsALeakingRankOnly) {
  CoordinatorOptions options;
  options.leak.window = 6;
  options.leak.min_growth_bytes = 2 * kMiB;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto leaky = StartWorker(server->address(), 0, 2, {"default"});
  auto steady = StartWorker(server->address(), 1, 2, {"default"});
  ASSERT_TRUE(WaitFor([&] { return leaky->attached() && steady->attached(); }, milliseconds(3000)));
  CachingPool* lp = leaky->pool("default");
  CachingPool* sp = steady->pool("default");
  auto leak_tag = lp->tag("kept_outputs");
  ASSERT_TRUE(leak_tag.ok());
  std::vector<void*> kept;
  for (int step = 1; step <= 12; ++step) {
    leaky->step_begin();
    steady->step_begin();
    auto k = lp->allocate(kMiB, kDefaultStream, *leak_tag);
    ASSERT_TRUE(k.ok());
    kept.push_back(*k);
    auto t = sp->allocate(4 * kMiB);
    ASSERT_TRUE(t.ok());
    ASSERT_TRUE(sp->deallocate(*t).ok());
    (void)leaky->step_end();
    (void)steady->step_end();
    std::this_thread::sleep_for(milliseconds(5));
  }
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = client.GetCluster();
        return v.ok() && !v->leaks.empty();
      },
      milliseconds(2000)));
  auto view = client.GetCluster();
  ASSERT_EQ(view->leaks.size(), 1u);
  EXPECT_EQ(view->leaks[0].rank, 0);
  EXPECT_EQ(view->leaks[0].pool, "default");
  EXPECT_EQ(view->leaks[0].tag, "kept_outputs");
  EXPECT_NEAR(static_cast<double>(view->leaks[0].bytes_per_step), static_cast<double>(kMiB), 1024.0);
  for (void* p : kept) (void)lp->deallocate(p);
}

TEST(CoordinatorService, KeyValueGetWaitsForPut) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto client = Client(*server);
  EXPECT_EQ(client.Get("nccl-id", 0).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(client.Get("nccl-id", 50).status().code(), StatusCode::kDeadlineExceeded);
  std::thread putter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    auto other = Client(*server);
    EXPECT_TRUE(other.Put("nccl-id", std::string("\x01\x02\x00\x03", 4)).ok());
  });
  auto value = client.Get("nccl-id", 5000);
  putter.join();
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, std::string("\x01\x02\x00\x03", 4));
}

TEST(CoordinatorService, WatchStreamsSnapshots) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"default"});
  auto client = Client(*server);
  int seen = 0;
  Status status = client.Watch(50, [&](const ClusterView& view) {
    if (!view.workers.empty()) ++seen;
    return seen < 3;
  });
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(seen, 3);
}

// Each Watch holds a server thread while open: past --max-watches a new one ends at once, naming the flag,
// and the open ones are served on; a closed one frees its place once the server notices (next interval).
TEST(CoordinatorService, WatchStreamsBeyondTheLimitAreRefusedAtOnceNamingIt) {
  CoordinatorOptions options;
  options.limits.max_watches = 2;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  std::atomic<bool> stop{false};
  std::atomic<int> watching{0};
  std::vector<std::thread> watchers;
  std::vector<Status> ended(2);
  for (int i = 0; i < 2; ++i) {
    watchers.emplace_back([&, i] {
      auto client = Client(*server);
      bool counted = false;
      ended[static_cast<std::size_t>(i)] = client.Watch(50, [&](const ClusterView&) {
        if (!counted) ++watching;
        counted = true;
        return !stop.load();
      });
    });
  }
  ASSERT_TRUE(WaitFor([&] { return watching.load() == 2; }, milliseconds(5000)));
  auto client = Client(*server);
  int third_snapshots = 0;
  const auto started = std::chrono::steady_clock::now();
  Status third = client.Watch(50, [&](const ClusterView&) { return ++third_snapshots < 2; });
  EXPECT_EQ(third.code(), StatusCode::kResourceExhausted) << third.ToString();
  EXPECT_NE(third.message().find("--max-watches 2"), std::string::npos) << third.ToString();
  EXPECT_EQ(third_snapshots, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, milliseconds(2000)) << "refused at once";
  EXPECT_TRUE(client.GetCluster().ok());  // the other RPCs are served on
  stop = true;
  for (auto& t : watchers) t.join();
  for (const Status& s : ended) EXPECT_TRUE(s.ok()) << s.ToString();
  // The server notices a closed stream at its next snapshot (one interval, 50 ms here), then frees the place.
  Status again = ResourceExhausted("not tried");
  EXPECT_TRUE(WaitFor(
      [&] {
        again = client.Watch(50, [&](const ClusterView&) { return ++third_snapshots < 2; });
        return again.ok();
      },
      milliseconds(3000)))
      << again.ToString();
  EXPECT_EQ(third_snapshots, 2);
}

TEST(CoordinatorService, HealthCheckAndPrometheusMetricsAnswer) {
  CoordinatorOptions options;
  options.metrics_listen = "127.0.0.1:0";
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"default"});
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(3000)));

  // grpc.health.v1.Health/Check with an empty request: SERVING is field 1 = 1 (bytes 08 01).
  auto channel = grpc::CreateChannel(server->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  grpc::CompletionQueue cq;
  grpc::ByteBuffer request, response;
  grpc::Slice empty("");
  request = grpc::ByteBuffer(&empty, 1);
  auto call = generic.PrepareUnaryCall(&context, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  ASSERT_TRUE(cq.Next(&tag, &ok));
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
  cq.Shutdown();

  // Prometheus text over plain HTTP.
  ASSERT_GT(server->metrics_port(), 0);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(server->metrics_port()));
  ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::send(fd, get.data(), get.size(), 0), static_cast<ssize_t>(get.size()));
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    text.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);
  EXPECT_NE(text.find("200 OK"), std::string::npos);
  EXPECT_NE(text.find("memcoord_worker_live{rank=\"0\""), std::string::npos) << text;
  EXPECT_NE(text.find("memcoord_pool_allocated_bytes{rank=\"0\""), std::string::npos);
}

}  // namespace
}  // namespace memcoord::coordinator
