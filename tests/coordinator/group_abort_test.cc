// A group stays aborted after a death (cluster_state.h): ranks that register into it later, or re-register
// after their connection was reset, get the same Abort; once every rank of the group has left, the group is
// clean again. And command ids do not restart at 1 with each coordinator process (service_state.h). Over
// real gRPC on loopback: an in-process CoordinatorServer, raw Attach streams and in-process Workers.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/service_state.h"
#include "coordinator_fixtures.h"
#include "memcoord/v1/coordinator.grpc.pb.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::FindRank;
using memcoord::testing::StartServer;
using memcoord::testing::StartWorker;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

// One Attach stream driven by hand. Every read is bounded by the stream's deadline (`life`), so a missing
// message fails the test instead of hanging it.
struct Session {
  Session(const std::string& address, milliseconds life = milliseconds(15000),
          const grpc::ChannelArguments& args = {})
      : stub(v1::Coordinator::NewStub(
            grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args))) {
    context.set_deadline(std::chrono::system_clock::now() + life);
    stream = stub->Attach(&context);
  }
  ~Session() { reset(); }
  bool register_rank(int rank, int world, const std::string& group, std::int64_t pid) {
    v1::WorkerMessage m;
    m.mutable_register_()->set_rank(rank);
    m.mutable_register_()->set_world_size(world);
    m.mutable_register_()->set_host("raw");
    m.mutable_register_()->set_pid(pid);
    m.mutable_register_()->set_report_interval_ms(1000);
    m.mutable_register_()->set_group(group);
    return stream->Write(m);
  }
  bool report(std::int64_t step) {
    v1::WorkerMessage m;
    m.mutable_report()->set_step(step);
    return stream->Write(m);
  }
  // The next message, or nullopt when the stream ended (or its deadline passed) first.
  std::optional<v1::CoordinatorMessage> next() {
    v1::CoordinatorMessage m;
    if (!stream->Read(&m)) return std::nullopt;
    return m;
  }
  // Reads until an Abort comes; nullopt when the stream ended first.
  std::optional<v1::AbortCommand> next_abort() {
    while (auto m = next()) {
      if (m->has_abort()) return m->abort();
    }
    return std::nullopt;
  }
  // Breaks the stream the way a connection reset does: the coordinator sees it end without a close.
  void reset() {
    if (done) return;
    done = true;
    context.TryCancel();
    (void)stream->Finish();
  }

  std::unique_ptr<v1::Coordinator::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  bool done = false;
};

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int HeldInGroup(const CoordinatorServer& server, const std::string& group) {
  int held = 0;
  for (const WorkerRecord& w : server.snapshot().workers) {
    held += w.id.group == group && HoldsRank(w.state) ? 1 : 0;
  }
  return held;
}

TEST(GroupAbort, LateAndReRegisteringRanksGetTheAbortUntilEveryRankLeft) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  const std::string address = server->address();
  auto rank0 = std::make_unique<Session>(address);
  auto rank1 = std::make_unique<Session>(address);
  ASSERT_TRUE(rank0->register_rank(0, 3, "job", 100));
  ASSERT_TRUE(rank1->register_rank(1, 3, "job", 101));
  for (Session* s : {rank0.get(), rank1.get()}) {
    auto hello = s->next();
    ASSERT_TRUE(hello && hello->has_registered());
  }

  // Rank 1 dies (its stream breaks): rank 0 is aborted, naming it.
  rank1->reset();
  auto abort0 = rank0->next_abort();
  ASSERT_TRUE(abort0);
  EXPECT_EQ(abort0->dead_rank(), 1);
  EXPECT_TRUE(Contains(abort0->reason(), "rank 1")) << abort0->reason();

  // Rank 2 registers late: Registered, then the same Abort.
  Session rank2(address);
  ASSERT_TRUE(rank2.register_rank(2, 3, "job", 102));
  auto hello2 = rank2.next();
  ASSERT_TRUE(hello2 && hello2->has_registered());
  auto abort2 = rank2.next();
  ASSERT_TRUE(abort2 && abort2->has_abort());
  EXPECT_EQ(abort2->abort().dead_rank(), 1);
  EXPECT_EQ(abort2->abort().reason(), abort0->reason());

  // Rank 1, alive after all (a connection reset), re-registers at once: it learns of the abort its own
  // "death" caused.
  Session again(address);
  ASSERT_TRUE(again.register_rank(1, 3, "job", 101));
  auto hello1 = again.next();
  ASSERT_TRUE(hello1 && hello1->has_registered());
  auto abort1 = again.next();
  ASSERT_TRUE(abort1 && abort1->has_abort());
  EXPECT_EQ(abort1->abort().dead_rank(), 1);
  EXPECT_TRUE(Contains(abort1->abort().reason(), "rank 1")) << abort1->abort().reason();

  // Another group is untouched.
  Session other(address, milliseconds(1500));
  ASSERT_TRUE(other.register_rank(5, 6, "other", 200));  // ranks are cluster-wide
  auto other_hello = other.next();
  ASSERT_TRUE(other_hello && other_hello->has_registered());
  EXPECT_FALSE(other.next()) << "a rank of another group was aborted";

  // Every rank of the group leaves: the group is clean, and a restarted job's rank registers unaborted (its
  // stream ends only at its deadline, with nothing after Registered).
  rank0->reset();
  rank2.reset();
  again.reset();
  ASSERT_TRUE(WaitFor([&] { return HeldInGroup(*server, "job") == 0; }, milliseconds(5000)));
  Session restarted(address, milliseconds(1500));
  ASSERT_TRUE(restarted.register_rank(0, 3, "job", 300));
  auto hello_restarted = restarted.next();
  ASSERT_TRUE(hello_restarted && hello_restarted->has_registered());
  auto after = restarted.next();
  EXPECT_FALSE(after) << "the restarted job's rank got: " << after->DebugString();
}

TEST(GroupAbort, ADeathInAGroupWithNoOtherRankAbortsNothingLater) {
  auto server = StartServer();
  ASSERT_TRUE(server);
  {
    Session only(server->address());
    ASSERT_TRUE(only.register_rank(0, 2, "solo", 100));
    auto hello = only.next();
    ASSERT_TRUE(hello && hello->has_registered());
  }  // reset: it dies alone; no rank was told, so none can be out of step
  ASSERT_TRUE(WaitFor([&] { return HeldInGroup(*server, "solo") == 0; }, milliseconds(5000)));
  Session next(server->address(), milliseconds(1500));
  ASSERT_TRUE(next.register_rank(1, 2, "solo", 101));
  auto hello = next.next();
  ASSERT_TRUE(hello && hello->has_registered());
  EXPECT_FALSE(next.next());
}

// End to end with real workers: the seam breaks one worker's session once (as a connection reset would);
// the other worker is aborted at once, and the broken one, which re-attaches within a second, is aborted
// too, through its own abort handling, naming the same dead rank.
TEST(GroupAbort, AWorkerWhoseSessionWasResetLearnsOfTheAbortWhenItReattaches) {
  CoordinatorOptions options;
  std::atomic<bool> armed{false};
  options.before_attach_message = [&armed](int kind) {
    if (kind == v1::WorkerMessage::kReport && armed.exchange(false))
      throw std::runtime_error("injected reset");
  };
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  std::vector<std::unique_ptr<Worker>> workers;
  for (int r = 0; r < 2; ++r) workers.push_back(StartWorker(server->address(), r, 2, {"default"}));
  ASSERT_TRUE(workers[0] && workers[1]);
  ASSERT_TRUE(WaitFor([&] { return workers[0]->attached() && workers[1]->attached(); }, milliseconds(5000)));
  armed = true;
  ASSERT_TRUE(
      WaitFor([&] { return workers[0]->abort_info() && workers[1]->abort_info(); }, milliseconds(5000)))
      << "rank 0 aborted: " << workers[0]->abort_info().has_value()
      << ", rank 1 aborted: " << workers[1]->abort_info().has_value();
  const int dead = workers[0]->abort_info()->dead_rank;
  EXPECT_TRUE(dead == 0 || dead == 1) << dead;
  EXPECT_EQ(workers[1]->abort_info()->dead_rank, dead);
  // The broken one re-registered (it holds its rank again) before it heard of the abort.
  const WorkerRecord* w = nullptr;
  ClusterView view;
  ASSERT_TRUE(WaitFor(
      [&] {
        view = server->snapshot();
        w = FindRank(view, dead);
        return w != nullptr && HoldsRank(w->state);
      },
      milliseconds(5000)));
}

// Workers ping the coordinator every second (keepalive, with or without calls). gRPC's server default strikes
// pings more often than every 5 minutes while it sends no data (a worker's session carries data one way only)
// and after 2 strikes sends GOAWAY, which would break the session and abort the job: the coordinator allows
// them. Past 5 s of an idle session, more than three such pings have come.
TEST(Keepalive, AWorkerPingingEverySecondKeepsItsSession) {
  CoordinatorOptions options;
  options.dead_after = milliseconds(30000);  // silence is not what this test is about
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 1000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  Session session(server->address(), milliseconds(15000), args);
  ASSERT_TRUE(session.register_rank(0, 1, "world", 100));
  auto hello = session.next();
  ASSERT_TRUE(hello && hello->has_registered());
  // Idle (the keepalive pings are all the connection carries), then a report must still go through.
  std::this_thread::sleep_for(milliseconds(5500));
  ASSERT_TRUE(session.report(1));
  ASSERT_TRUE(WaitFor(
      [&] {
        const ClusterView view = server->snapshot();
        const WorkerRecord* w = FindRank(view, 0);
        return w != nullptr && w->state == WorkerState::kLive && w->reports == 1;
      },
      milliseconds(2000)))
      << "the session broke: " << FindRank(server->snapshot(), 0)->dead_reason;
}

// Command ids start at a random base in [2^32, 2^53) per coordinator process.
TEST(CommandIds, EachCoordinatorProcessStartsAtItsOwnRandomBaseAndCountsUp) {
  std::set<std::uint64_t> bases;
  for (int i = 0; i < 4; ++i) {
    ServiceState state{CoordinatorOptions{}};
    const std::uint64_t first = state.next_command_id();
    EXPECT_EQ(first, state.first_command_id());
    EXPECT_GE(first, std::uint64_t{1} << 32);
    EXPECT_LT(first, std::uint64_t{1} << 53);
    EXPECT_EQ(state.next_command_id(), first + 1);
    bases.insert(first);
  }
  EXPECT_EQ(bases.size(), 4u);  // equal bases: about 1 in 2^51
}

// Two coordinators in turn (a restart): the first trim of each reaches the worker with different ids.
TEST(CommandIds, ARestartedCoordinatorDoesNotReuseTheFirstCommandId) {
  std::vector<std::uint64_t> first_ids;
  for (int run = 0; run < 2; ++run) {
    auto server = StartServer();
    ASSERT_TRUE(server);
    auto worker = StartWorker(server->address(), 0, 1, {"default"});
    ASSERT_TRUE(worker);
    ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(5000)));
    ClientOptions client_options;
    client_options.address = server->address();
    CoordinatorClient client(client_options);
    TrimSpec spec;
    spec.now = true;
    auto outcome = client.Trim(spec);
    ASSERT_TRUE(outcome.ok()) << outcome.status().ToString();
    EXPECT_TRUE(outcome->complete);
    const auto applied = worker->applied_commands();
    ASSERT_EQ(applied.size(), 1u);
    EXPECT_NE(applied[0].command_id, 1u);
    EXPECT_GE(applied[0].command_id, std::uint64_t{1} << 32);
    first_ids.push_back(applied[0].command_id);
  }
  EXPECT_NE(first_ids[0], first_ids[1]);
}

}  // namespace
}  // namespace memcoord::coordinator
