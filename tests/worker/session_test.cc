// The worker's coordinator session against a real coordinator (gRPC on loopback, in this process):
// exceptions on the session's threads never end the process, and workers re-attach fast after a restart.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "tests/coordinator/test_support.h"
#include "tests/support/forwarding_backend.h"
#include "tests/worker/uuid_backend.h"
#include "worker/detail/coordinator_session.h"
#include "worker/worker.h"

namespace memcoord::detail {
namespace {

using coordinator::ClientOptions;
using coordinator::CoordinatorClient;
using coordinator::CoordinatorOptions;
using coordinator::CoordinatorServer;
using coordinator::TrimSpec;
using memcoord::testing::LiveCount;
using memcoord::testing::StartWorker;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

std::unique_ptr<CoordinatorServer> StartServer(const std::string& listen = "127.0.0.1:0") {
  CoordinatorOptions options;
  options.listen = listen;
  auto server = CoordinatorServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? *std::move(server) : nullptr;
}

std::unique_ptr<CoordinatorClient> Client(const CoordinatorServer& server) {
  ClientOptions options;
  options.address = server.address();
  return std::make_unique<CoordinatorClient>(options);
}

// A session host whose deliver() or sample() throws when told to: the test seam for the reader and
// writer paths (a training program's hook or a pool can throw the same way in real use).
class ThrowingHost final : public SessionHost {
 public:
  ReportSample sample() override {
    ++samples;
    if (throw_in_sample.exchange(false)) throw std::runtime_error("sample failed on purpose");
    return ReportSample{};
  }
  void deliver(const WorkerCommand& command) override {
    ++delivered;
    if (throw_in_deliver.exchange(false)) throw std::runtime_error("deliver failed on purpose");
    CommandAck ack;
    ack.command_id = command.command_id;
    if (session != nullptr) session->ack(ack);  // as the Worker does for a `now` command
  }
  CoordinatorSession* session = nullptr;
  std::atomic<bool> throw_in_deliver{false};
  std::atomic<bool> throw_in_sample{false};
  std::atomic<int> delivered{0};
  std::atomic<int> samples{0};
};

SessionConfig ConfigFor(const CoordinatorServer& server, int rank, int world) {
  SessionConfig config;
  config.address = server.address();
  config.rank = rank;
  config.local_rank = rank;
  config.world_size = world;
  config.host = "test";
  config.backend = "host";
  config.pid = 1000 + rank;
  config.report_interval = milliseconds(50);
  return config;
}

TEST(CoordinatorSession, AnExceptionInTheReaderEndsTheSessionNotTheProcessAndItReattaches) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto client = Client(*server);
  ThrowingHost host, peer_host;
  CoordinatorSession session(ConfigFor(*server, 0, 2), host);
  CoordinatorSession peer(ConfigFor(*server, 1, 2), peer_host);
  host.session = &session;
  peer_host.session = &peer;
  session.start();
  peer.start();
  ASSERT_TRUE(WaitFor([&] { return session.attached() && peer.attached(); }, milliseconds(5000)));
  host.throw_in_deliver = true;
  TrimSpec spec;
  spec.now = true;
  spec.deadline = milliseconds(1000);
  auto outcome = client->Trim(spec);  // rank 0's reader throws while delivering it
  ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
  EXPECT_GE(host.delivered.load(), 1);
  // The process is still here; the session detached cleanly and attached again.
  ASSERT_TRUE(WaitFor([&] { return session.registrations() == 2 && session.attached(); }, milliseconds(5000)))
      << "registrations " << session.registrations();
  auto view = client->GetCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(LiveCount(*view), 2);
  // A clean detach is no death: the peer's group was not aborted, its session never broke.
  EXPECT_EQ(peer.registrations(), 1u);
  EXPECT_TRUE(peer.attached());
  // The new session handles commands again.
  const int before = host.delivered.load();
  auto second = client->Trim(spec);
  ASSERT_TRUE(second.ok());
  EXPECT_TRUE(second->complete);
  EXPECT_GT(host.delivered.load(), before);
}

TEST(CoordinatorSession, AnExceptionInThePeriodicReportEndsTheSessionNotTheProcess) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  ThrowingHost host;
  CoordinatorSession session(ConfigFor(*server, 0, 1), host);
  session.start();
  ASSERT_TRUE(WaitFor([&] { return session.attached(); }, milliseconds(5000)));
  host.throw_in_sample = true;  // the writer thread's next periodic report throws
  ASSERT_TRUE(WaitFor([&] { return session.registrations() == 2 && session.attached(); }, milliseconds(5000)))
      << "registrations " << session.registrations();
}

// The worker registers its backend's GPU UUID; GetCluster (what `memcoord status` reads) hands it back.
TEST(CoordinatorSession, AWorkerRegistersItsGpuUuidAndGetClusterReturnsIt) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string uuid = "GPU-00112233-4455-6677-8899-aabbccddeeff";
  WorkerOptions options;
  options.coordinator = server->address();
  options.topology = Topology{0, 0, 1, "test"};
  options.backend_factory = memcoord::testing::UuidBackend::Factory(uuid);
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  auto client = Client(*server);
  Result<coordinator::ClusterView> view = InvalidArgument("not asked yet");
  ASSERT_TRUE(WaitFor(
      [&] {
        view = client->GetCluster();
        return view.ok() && view->workers.size() == 1;
      },
      milliseconds(5000)));
  EXPECT_EQ(view->workers[0].id.device_uuid, uuid);
}

TEST(CoordinatorSession, SixtyFourWorkersReattachWithinAGenerousBoundAfterARestartOnTheSamePort) {
  constexpr int kWorkers = 64;
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string address = server->address();
  std::vector<std::unique_ptr<ThrowingHost>> hosts;
  std::vector<std::unique_ptr<CoordinatorSession>> sessions;
  for (int r = 0; r < kWorkers; ++r) {
    hosts.push_back(std::make_unique<ThrowingHost>());
    sessions.push_back(std::make_unique<CoordinatorSession>(ConfigFor(*server, r, kWorkers), *hosts.back()));
    sessions.back()->start();
  }
  auto all_registered = [&](std::uint64_t n) {
    for (auto& s : sessions) {
      if (s->registrations() < n || !s->attached()) return false;
    }
    return true;
  };
  ASSERT_TRUE(WaitFor([&] { return all_registered(1); }, milliseconds(20000)));
  server->Shutdown();
  server.reset();
  std::this_thread::sleep_for(milliseconds(300));  // every session has seen the break and is backing off
  server = StartServer(address);
  ASSERT_TRUE(server);
  const auto serving = SteadyClock::now();
  // The target is 1 s (reattach_bench measures it); 5 s leaves room for a loaded 2-core CI machine.
  ASSERT_TRUE(WaitFor([&] { return all_registered(2); }, milliseconds(5000)));
  const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - serving).count();
  std::printf("%d sessions re-attached %.1f ms after the restarted coordinator served\n", kWorkers, ms);
  EXPECT_LT(ms, 5000.0);
}

// A session host that keeps every Abort it is given.
class AbortRecordingHost final : public SessionHost {
 public:
  ReportSample sample() override { return ReportSample{}; }
  void deliver(const WorkerCommand& command) override {
    if (command.kind != WorkerCommand::Kind::kAbort) return;
    std::lock_guard lock(mu);
    aborts.push_back(command);
  }
  std::vector<WorkerCommand> received() {
    std::lock_guard lock(mu);
    return aborts;
  }
  std::mutex mu;
  std::vector<WorkerCommand> aborts;
};

const coordinator::WorkerRecord* Rank(const coordinator::ClusterView& view, int rank) {
  for (const auto& w : view.workers) {
    if (w.id.rank == rank) return &w;
  }
  return nullptr;
}

// Two sessions of ranks 0 and 1 attached to `server`, each with an AbortRecordingHost: `first` stays,
// `second` leaves (fails or stops) in the tests below.
struct AttachedPair {
  explicit AttachedPair(const CoordinatorServer& server)
      : first(ConfigFor(server, 0, 2), first_host), second(ConfigFor(server, 1, 2), second_host) {
    first.start();
    second.start();
  }
  bool attached() {
    return WaitFor([&] { return first.attached() && second.attached(); }, std::chrono::milliseconds(5000));
  }
  AbortRecordingHost first_host, second_host;
  CoordinatorSession first, second;
};

TEST(CoordinatorSession, AFailedDetachAbortsThePeersNamingTheRankAndTheReason) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  AttachedPair pair(*server);
  ASSERT_TRUE(pair.attached());
  AbortRecordingHost& survivor_host = pair.first_host;
  AbortRecordingHost& failing_host = pair.second_host;
  CoordinatorSession& survivor = pair.first;
  CoordinatorSession& failing = pair.second;
  const auto begin = SteadyClock::now();
  failing.fail("exited on ValueError: boom");
  const double fail_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - begin).count();
  EXPECT_LT(fail_ms, 1000.0) << "fail() is bounded like the clean detach";
  ASSERT_TRUE(WaitFor([&] { return !survivor_host.received().empty(); }, milliseconds(2000)))
      << "the survivor got no Abort";
  const WorkerCommand abort = survivor_host.received().front();
  EXPECT_EQ(abort.dead_rank, 1);
  EXPECT_EQ(abort.reason, "rank 1 (host test, pid 1001) is dead: exited on ValueError: boom");
  EXPECT_TRUE(failing_host.received().empty());
  auto view = Client(*server)->GetCluster();
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const coordinator::WorkerRecord* dead = Rank(*view, 1);
  ASSERT_NE(dead, nullptr);
  EXPECT_EQ(dead->state, coordinator::WorkerState::kDead);
  EXPECT_EQ(dead->dead_reason, "exited on ValueError: boom");
  EXPECT_EQ(survivor.registrations(), 1u);  // the survivor's own session never broke
}

TEST(CoordinatorSession, AFailedDetachWithAnInvalidOrHugeReasonStillArrivesAsValidUtf8) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  AttachedPair pair(*server);
  ASSERT_TRUE(pair.attached());
  AbortRecordingHost& survivor_host = pair.first_host;
  CoordinatorSession& failing = pair.second;
  // Invalid UTF-8 would make the coordinator refuse the whole message (proto3 strings), and so break the
  // stream: the peers would still be aborted, but with a generic reason.
  failing.fail("bad \xff\xfe bytes " + std::string(5000, 'x'));
  ASSERT_TRUE(WaitFor([&] { return !survivor_host.received().empty(); }, milliseconds(2000)));
  const WorkerCommand abort = survivor_host.received().front();
  EXPECT_EQ(abort.dead_rank, 1);
  EXPECT_NE(abort.reason.find("is dead: bad ?? bytes xxx"), std::string::npos) << abort.reason;
  EXPECT_LT(abort.reason.size(), 1100u);
}

TEST(CoordinatorSession, ACleanDetachAbortsNobody) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  AttachedPair pair(*server);
  ASSERT_TRUE(pair.attached());
  AbortRecordingHost& survivor_host = pair.first_host;
  CoordinatorSession& survivor = pair.first;
  CoordinatorSession& leaving = pair.second;
  const auto begin = SteadyClock::now();
  leaving.stop();
  const double stop_ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - begin).count();
  EXPECT_LT(stop_ms, 1000.0);
  auto client = Client(*server);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = client->GetCluster();
        const coordinator::WorkerRecord* w = view.ok() ? Rank(*view, 1) : nullptr;
        return w != nullptr && w->state == coordinator::WorkerState::kDead;
      },
      milliseconds(2000)));
  auto view = client->GetCluster();
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(Rank(*view, 1)->dead_reason, "detached (closed its session)");
  std::this_thread::sleep_for(milliseconds(300));  // an abort, were one sent, would have arrived by now
  EXPECT_TRUE(survivor_host.received().empty()) << survivor_host.received().front().reason;
  EXPECT_TRUE(survivor.attached());
  EXPECT_EQ(survivor.registrations(), 1u);
}

// Worker::fail, as the C ABI's memcoord_fail calls it: the peer Worker's abort_info names the failed rank.
TEST(CoordinatorSession, WorkerFailAbortsThePeerWorker) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto survivor = StartWorker(server->address(), 0, 2, {});
  auto failing = StartWorker(server->address(), 1, 2, {});
  ASSERT_TRUE(survivor);
  ASSERT_TRUE(failing);
  ASSERT_TRUE(WaitFor([&] { return survivor->attached() && failing->attached(); }, milliseconds(5000)));
  failing->fail("exited with code 3");
  ASSERT_TRUE(WaitFor([&] { return survivor->abort_info().has_value(); }, milliseconds(2000)));
  const AbortInfo info = *survivor->abort_info();
  EXPECT_EQ(info.dead_rank, 1);
  EXPECT_NE(info.reason.find("rank 1 (host "), std::string::npos) << info.reason;
  EXPECT_NE(info.reason.find("is dead: exited with code 3"), std::string::npos) << info.reason;
  EXPECT_FALSE(failing->attached());
  failing->shutdown();  // after fail(): nothing more is sent, and it returns at once
  EXPECT_FALSE(failing->abort_info().has_value());
}

// A loop of steps far shorter than a millisecond: step-end reports are spaced (at most 1,000 a second), so
// the coordinator's --max-report-rate (2,000 a second) never cuts a healthy rank off, which would abort its
// group.
TEST(CoordinatorSession, SubMillisecondStepsStayUnderTheCoordinatorsReportRate) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto peer = StartWorker(server->address(), 0, 2, {}, milliseconds(100));
  auto fast = StartWorker(server->address(), 1, 2, {}, milliseconds(100));
  ASSERT_TRUE(peer);
  ASSERT_TRUE(fast);
  ASSERT_TRUE(WaitFor([&] { return peer->attached() && fast->attached(); }, milliseconds(5000)));
  const auto until = SteadyClock::now() + milliseconds(2500);
  std::int64_t steps = 0;
  while (SteadyClock::now() < until) {
    fast->step_begin();
    ASSERT_TRUE(fast->step_end().ok());
    ++steps;
  }
  EXPECT_GT(steps, 10000) << "the loop was not fast enough to test the rate";
  std::this_thread::sleep_for(milliseconds(300));  // a cut-off session would have broken by now
  EXPECT_TRUE(fast->attached());
  EXPECT_FALSE(peer->abort_info().has_value()) << peer->abort_info()->reason;
  // The coordinator knows a recent step: the periodic report carries what the spaced step ends skipped.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = Client(*server)->GetCluster();
        if (!view.ok()) return false;
        const coordinator::WorkerRecord* record = Rank(*view, 1);
        return record != nullptr && record->step == steps;
      },
      milliseconds(2000)));
}

// Host memory whose releases block while the gate holds: a trim then blocks inside the pool, as one does on a
// GPU when it waits for a stream stuck in a collective on a dead peer.
struct ReleaseGate {
  std::mutex mu;
  std::condition_variable cv;
  bool hold = false;
  int blocked = 0;  // releases waiting at the gate
};

class GatedReleaseBackend final : public memcoord::testing::ForwardingBackend<HostBackend> {
 public:
  explicit GatedReleaseBackend(std::shared_ptr<ReleaseGate> gate)
      : ForwardingBackend(std::uint64_t{1} << 30), gate_(std::move(gate)) {}
  void unmap(std::uintptr_t address, std::size_t bytes) noexcept override {
    pass();
    ForwardingBackend::unmap(address, bytes);
  }

 protected:
  void do_release(void* ptr, std::size_t bytes) noexcept override {
    pass();
    ForwardingBackend::do_release(ptr, bytes);
  }

 private:
  void pass() noexcept {
    std::unique_lock lock(gate_->mu);
    if (!gate_->hold) return;
    ++gate_->blocked;
    gate_->cv.notify_all();
    gate_->cv.wait(lock, [&] { return !gate_->hold; });
  }
  std::shared_ptr<ReleaseGate> gate_;
};

// A `trim --now` that blocks in the pool must not keep the session's reader from delivering an abort: the
// command runs on the worker's own thread for immediate commands, not on the reader.
TEST(CoordinatorSession, AnAbortArrivesWhileAnImmediateTrimIsBlocked) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  auto gate = std::make_shared<ReleaseGate>();
  WorkerOptions options;
  options.coordinator = server->address();
  options.topology = Topology{0, 0, 2, "test"};
  options.backend_factory = [gate](int) -> Result<std::unique_ptr<DeviceBackend>> {
    return std::unique_ptr<DeviceBackend>(std::make_unique<GatedReleaseBackend>(gate));
  };
  auto blocked = Worker::init(options);
  ASSERT_TRUE(blocked.ok()) << blocked.status().ToString();
  auto failing = StartWorker(server->address(), 1, 2, {});
  ASSERT_TRUE(failing);
  ASSERT_TRUE(WaitFor([&] { return (*blocked)->attached() && failing->attached(); }, milliseconds(5000)));
  auto pool = (*blocked)->device_pool(-1);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  // 80 MiB: a multiple of the 20 MiB unit, so the miss maps exactly it (PoolOptions::grow_to_unit_end).
  auto block = (*pool)->allocate(std::size_t{80} << 20);
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ASSERT_TRUE((*pool)->deallocate(*block).ok());  // cached: a trim has something to release
  ASSERT_EQ((*pool)->stats().largest_free_bytes, std::size_t{80} << 20);
  {
    std::lock_guard lock(gate->mu);
    gate->hold = true;
  }
  std::thread trim([&] {
    TrimSpec spec;
    spec.now = true;
    spec.deadline = milliseconds(3000);
    (void)Client(*server)->Trim(spec);
  });
  {
    std::unique_lock lock(gate->mu);
    ASSERT_TRUE(gate->cv.wait_for(lock, std::chrono::seconds(5), [&] { return gate->blocked > 0; }))
        << "the trim never reached the backend";
  }
  // Reports go on meanwhile (a rank whose reports stop is taken for dead): they read the pool's figures
  // without waiting for the lock the blocked trim holds.
  auto figures = std::async(std::launch::async, [&] { return (*pool)->stats_without_waiting(); });
  const bool read = figures.wait_for(std::chrono::seconds(1)) == std::future_status::ready;
  std::this_thread::sleep_for(milliseconds(400));  // four report intervals
  auto view = Client(*server)->GetCluster();
  failing->fail("exited on RuntimeError: boom");
  const bool told = WaitFor([&] { return (*blocked)->abort_info().has_value(); }, milliseconds(2000));
  {
    std::lock_guard lock(gate->mu);
    gate->hold = false;
  }
  gate->cv.notify_all();
  trim.join();
  ASSERT_TRUE(read) << "stats_without_waiting() waited for the pool's lock";
  EXPECT_EQ(figures.get().largest_free_bytes, std::size_t{80} << 20);  // as the last stats() left it
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  const coordinator::WorkerRecord* record = Rank(*view, 0);
  ASSERT_NE(record, nullptr);
  EXPECT_LT(record->last_report_age_ms, 300u) << "the blocked rank stopped reporting";
  ASSERT_TRUE(told) << "the abort waited for the blocked trim";
  EXPECT_EQ((*blocked)->abort_info()->dead_rank, 1);
}

// A listener that accepts TCP connections (the kernel does, from its backlog) but never speaks HTTP/2: the
// session's Attach() blocks until gRPC's connection attempt times out (5 s). stop() must not wait for that.
TEST(CoordinatorSession, StopReturnsAtOnceWhileTheCoordinatorAcceptsButNeverAnswers) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::listen(listener, 16), 0);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  SessionConfig config;
  config.address = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  config.host = "test";
  config.backend = "host";
  AbortRecordingHost host;
  for (const bool failed : {false, true}) {
    CoordinatorSession session(config, host);
    session.start();
    std::this_thread::sleep_for(milliseconds(300));  // inside Attach(), waiting for the handshake
    const auto begin = SteadyClock::now();
    if (failed) {
      session.fail("exited on RuntimeError: no coordinator");
    } else {
      session.stop();
    }
    const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - begin).count();
    std::printf("%s returned %.1f ms after it was called\n", failed ? "fail()" : "stop()", ms);
    EXPECT_LT(ms, 500.0) << (failed ? "fail()" : "stop()");
    EXPECT_FALSE(session.attached());
  }
  ::close(listener);
}

}  // namespace
}  // namespace memcoord::detail
