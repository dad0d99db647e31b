// The locked control plane over real gRPC on loopback: worker and admin tokens and what each may call, the
// loopback rule, health open and reflection off, /metrics on loopback unless a host is named, the limits
// (message size, sessions, report rate: a flooding session is cut off while a normal worker keeps reporting),
// and a reactor that survives an exception thrown while it handles a message.
#include <fmt/format.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "memcoord/v1/coordinator.grpc.pb.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::FindRank;
using memcoord::testing::StartServer;
using memcoord::testing::StartWorker;
using memcoord::testing::WaitFor;
using memcoord::testing::WaitForPools;
using std::chrono::milliseconds;

constexpr const char* kWorkerToken = "worker-token-0123";
constexpr const char* kAdminToken = "admin-token-4567";

CoordinatorOptions Locked() {
  CoordinatorOptions options;
  options.token = kWorkerToken;
  options.admin_token = kAdminToken;
  return options;
}

CoordinatorClient Client(const CoordinatorServer& server, const std::string& token) {
  ClientOptions options;
  options.address = server.address();
  options.token = token;
  return CoordinatorClient(options);
}

// A raw Attach stream with a chosen token, for a flooding or misbehaving peer.
struct RawSession {
  RawSession(const std::string& address, const std::string& token)
      : stub(v1::Coordinator::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    if (!token.empty()) context.AddMetadata("authorization", std::string("Bearer ") + token);
    stream = stub->Attach(&context);
  }
  ~RawSession() {
    context.TryCancel();
    if (!finished) (void)stream->Finish();
  }
  bool register_rank(int rank, const std::string& group) {
    v1::WorkerMessage m;
    m.mutable_register_()->set_rank(rank);
    m.mutable_register_()->set_world_size(rank + 1);
    m.mutable_register_()->set_host("raw");
    m.mutable_register_()->set_report_interval_ms(1000);
    m.mutable_register_()->set_group(group);
    return stream->Write(m);
  }
  bool report(std::int64_t step) {
    v1::WorkerMessage m;
    m.mutable_report()->set_step(step);
    return stream->Write(m);
  }
  grpc::Status finish() {
    v1::CoordinatorMessage m;
    while (stream->Read(&m)) {
    }
    finished = true;
    return stream->Finish();
  }
  std::unique_ptr<v1::Coordinator::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::CoordinatorMessage>> stream;
  bool finished = false;
};

// A unary call by full method name with an empty request and no token; returns its status.
grpc::Status CallUnary(const std::string& address, const std::string& method) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + milliseconds(5000));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  auto call = generic.PrepareUnaryCall(&context, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  EXPECT_TRUE(cq.Next(&tag, &ok));
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CoordinatorSecurity, WorkerTokenAttachesReadsAndUsesTheStoreButOnlyAdminTrimsSetsQuotasAndPlans) {
  auto server = StartServer(Locked());
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 2, {"default"}, milliseconds(50), kWorkerToken);
  auto admin_worker = StartWorker(server->address(), 1, 2, {"default"}, milliseconds(50), kAdminToken);
  ASSERT_TRUE(worker && admin_worker);
  ASSERT_TRUE(WaitFor([&] { return worker->attached() && admin_worker->attached(); }, milliseconds(5000)));

  auto as_worker = Client(*server, kWorkerToken);
  ASSERT_TRUE(as_worker.GetCluster().ok());
  ASSERT_TRUE(as_worker.Put("nccl-id", "abc").ok());
  auto value = as_worker.Get("nccl-id", 0);
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "abc");

  TrimSpec now;
  now.now = true;
  auto trim = as_worker.Trim(now);
  EXPECT_EQ(trim.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(trim.status().message(), "Trim needs the admin token")) << trim.status().ToString();
  auto quota = as_worker.SetQuota(0, "default", 1 << 20);
  EXPECT_EQ(quota.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(quota.status().message(), "SetQuota needs the admin token"));
  auto plan = as_worker.Plan(R"({"models": []})");
  EXPECT_EQ(plan.status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(Contains(plan.status().message(), "Plan needs the admin token"));

  auto as_admin = Client(*server, kAdminToken);
  // A quota names a pool the coordinator has heard of: wait for rank 0's first report (attached is earlier;
  // a loaded machine once ran SetQuota in between and got "rank 0 has no pool 'default'").
  ASSERT_TRUE(WaitForPools(as_admin, 0, 1));
  auto admin_trim = as_admin.Trim(now);
  ASSERT_TRUE(admin_trim.ok()) << admin_trim.status().ToString();
  EXPECT_EQ(admin_trim->acks.size(), 2u);
  auto admin_quota = as_admin.SetQuota(0, "default", 64 << 20);
  EXPECT_TRUE(admin_quota.ok()) << admin_quota.status().ToString();
  EXPECT_TRUE(as_admin.GetCluster().ok());

  auto anonymous = Client(*server, "").Trim(now);
  EXPECT_EQ(anonymous.status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(Contains(anonymous.status().message(), "admin token")) << anonymous.status().ToString();
  auto wrong = Client(*server, "guess").GetCluster();
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(Contains(wrong.status().message(), "wrong token")) << wrong.status().ToString();

  RawSession intruder(server->address(), "guess");
  intruder.register_rank(5, "world");
  const grpc::Status refused = intruder.finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAUTHENTICATED) << refused.error_message();
}

TEST(CoordinatorSecurity, HealthStaysOpenWithoutATokenAndReflectionIsOff) {
  auto server = StartServer(Locked());
  ASSERT_TRUE(server);
  EXPECT_TRUE(CallUnary(server->address(), "/grpc.health.v1.Health/Check").ok());
  const grpc::Status reflection =
      CallUnary(server->address(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo");
  EXPECT_EQ(reflection.error_code(), grpc::StatusCode::UNIMPLEMENTED) << reflection.error_message();
  EXPECT_EQ(CallUnary(server->address(), "/memcoord.v1.Coordinator/GetCluster").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(CoordinatorSecurity, BeyondLoopbackNeedsATokenOrInsecure) {
  CoordinatorOptions open;
  open.listen = "0.0.0.0:0";
  auto refused = CoordinatorServer::Start(open);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(refused.status().message(), "'0.0.0.0:0'")) << refused.status().ToString();
  EXPECT_TRUE(Contains(refused.status().message(), "--token-file"));
  EXPECT_TRUE(Contains(refused.status().message(), "--insecure"));

  CoordinatorOptions insecure = open;
  insecure.insecure = true;
  EXPECT_TRUE(StartServer(insecure));
  CoordinatorOptions with_token = Locked();
  with_token.listen = "0.0.0.0:0";
  EXPECT_TRUE(StartServer(with_token));

  CoordinatorOptions same = Locked();
  same.admin_token = kWorkerToken;
  auto equal = CoordinatorServer::Start(same);
  EXPECT_EQ(equal.status().code(), StatusCode::kInvalidArgument);
}

// The local address /proc/net/tcp lists for a listening TCP port ("0100007F" is 127.0.0.1); empty if none.
std::string ListeningAddressOfPort(int port) {
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  const std::string suffix = fmt::format(":{:04X}", port);
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state == "0A" && local.size() > suffix.size() && local.ends_with(suffix)) {
      return local.substr(0, local.size() - suffix.size());
    }
  }
  return "";
}

TEST(CoordinatorSecurity, MetricsListenOnLoopbackWhenGivenOnlyAPort) {
  for (const char* listen : {"0", ":0"}) {
    CoordinatorOptions options;
    options.metrics_listen = listen;
    auto server = StartServer(options);
    ASSERT_TRUE(server);
    ASSERT_GT(server->metrics_port(), 0);
    EXPECT_EQ(ListeningAddressOfPort(server->metrics_port()), "0100007F") << listen;
  }
  CoordinatorOptions everywhere;
  everywhere.metrics_listen = "0.0.0.0:0";
  auto server = StartServer(everywhere);
  ASSERT_TRUE(server);
  EXPECT_EQ(ListeningAddressOfPort(server->metrics_port()), "00000000");
}

TEST(CoordinatorSecurity, OversizedRequestsAreRefused) {
  CoordinatorOptions options;
  options.limits.max_message_bytes = 64 << 10;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto client = Client(*server, "");
  const Status big = client.Put("big", std::string(100 << 10, 'x'));
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted) << big.ToString();
  EXPECT_TRUE(client.Put("small", std::string(1 << 10, 'x')).ok());
}

TEST(CoordinatorSecurity, SessionsBeyondTheLimitAreRefusedAndOthersServed) {
  CoordinatorOptions options;
  options.limits.max_sessions = 2;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto first = StartWorker(server->address(), 0, 3, {"default"});
  auto second = StartWorker(server->address(), 1, 3, {"default"});
  ASSERT_TRUE(first && second);
  ASSERT_TRUE(WaitFor([&] { return first->attached() && second->attached(); }, milliseconds(5000)));
  {
    RawSession third(server->address(), "");
    third.register_rank(2, "world");
    const grpc::Status status = third.finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
    EXPECT_TRUE(Contains(status.error_message(), "--max-sessions 2")) << status.error_message();
  }
  EXPECT_TRUE(first->attached());
  second.reset();  // frees a slot
  auto third = StartWorker(server->address(), 2, 3, {"default"});
  ASSERT_TRUE(third);
  EXPECT_TRUE(WaitFor([&] { return third->attached(); }, milliseconds(5000)));
}

TEST(CoordinatorSecurity, AFloodingSessionIsCutOffWhileANormalWorkerKeepsReporting) {
  CoordinatorOptions options;
  options.limits.max_reports_per_second = 100;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 1, {"default"}, milliseconds(20));  // 50 reports/s
  ASSERT_TRUE(worker);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(5000)));

  RawSession flood(server->address(), "");
  ASSERT_TRUE(flood.register_rank(1, "flood"));
  const auto start = std::chrono::steady_clock::now();
  std::int64_t sent = 0;
  while (flood.report(sent) && std::chrono::steady_clock::now() - start < std::chrono::seconds(10)) ++sent;
  const grpc::Status status = flood.finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_TRUE(Contains(status.error_message(), "--max-report-rate 100")) << status.error_message();
  EXPECT_GT(sent, 100);

  // The normal worker is still attached, live, and its reports still arrive.
  auto before = server->snapshot();
  const WorkerRecord* w = FindRank(before, 0);
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->state, WorkerState::kLive);
  const std::uint64_t reports = w->reports;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = server->snapshot();
        const WorkerRecord* now = FindRank(view, 0);
        return now != nullptr && now->reports >= reports + 10 && now->state == WorkerState::kLive;
      },
      milliseconds(5000)));
  EXPECT_TRUE(worker->attached());
  auto flooded = server->snapshot();
  const WorkerRecord* cut = FindRank(flooded, 1);
  ASSERT_NE(cut, nullptr);
  EXPECT_NE(cut->state, WorkerState::kLive);
}

// Acks answer the coordinator's commands (a soak runs hundreds of trims a second): they are not reports.
TEST(CoordinatorSecurity, AcksAreNotCountedAgainstTheReportRate) {
  CoordinatorOptions options;
  options.limits.max_reports_per_second = 100;
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  RawSession session(server->address(), "");
  ASSERT_TRUE(session.register_rank(0, "world"));
  v1::WorkerMessage ack;
  for (int i = 0; i < 500; ++i) {
    ack.mutable_ack()->set_command_id(1000 + static_cast<std::uint64_t>(i));
    ASSERT_TRUE(session.stream->Write(ack)) << i;
  }
  ASSERT_TRUE(session.report(1));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto view = server->snapshot();
        const WorkerRecord* w = FindRank(view, 0);
        return w != nullptr && w->state == WorkerState::kLive && w->step == 1;
      },
      milliseconds(5000)));
}

TEST(CoordinatorSecurity, AnExceptionInTheAttachReactorEndsOnlyThatSessionWithInternal) {
  // The seam throws while an Ack is handled; the worker below never acks (no trim runs here).
  CoordinatorOptions options;
  std::atomic<int> thrown{0};
  options.before_attach_message = [&thrown](int kind) {
    if (kind != v1::WorkerMessage::kAck) return;
    ++thrown;
    throw std::runtime_error("injected");
  };
  auto server = StartServer(options);
  ASSERT_TRUE(server);
  auto worker = StartWorker(server->address(), 0, 2, {"default"}, milliseconds(20));
  ASSERT_TRUE(worker);
  ASSERT_TRUE(WaitFor([&] { return worker->attached(); }, milliseconds(5000)));

  RawSession victim(server->address(), "");
  ASSERT_TRUE(victim.register_rank(1, "other"));
  v1::WorkerMessage ack;
  ack.mutable_ack()->set_command_id(12345);
  ASSERT_TRUE(victim.stream->Write(ack));
  const grpc::Status status = victim.finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INTERNAL) << status.error_message();
  EXPECT_TRUE(Contains(status.error_message(), "injected")) << status.error_message();
  EXPECT_EQ(thrown.load(), 1);

  // The coordinator serves on: the worker keeps reporting, RPCs answer, a new session registers.
  const ClusterView after = server->snapshot();
  const WorkerRecord* w = FindRank(after, 0);
  ASSERT_NE(w, nullptr);
  const std::uint64_t reports = w->reports;
  EXPECT_TRUE(WaitFor(
      [&] {
        auto view = server->snapshot();
        const WorkerRecord* now = FindRank(view, 0);
        return now != nullptr && now->reports >= reports + 5;
      },
      milliseconds(5000)));
  EXPECT_TRUE(worker->attached());
  EXPECT_TRUE(Client(*server, "").GetCluster().ok());
  RawSession next(server->address(), "");
  ASSERT_TRUE(next.register_rank(1, "other"));
  EXPECT_TRUE(WaitFor(
      [&] {
        auto view = server->snapshot();
        const WorkerRecord* again = FindRank(view, 1);
        return again != nullptr && again->state == WorkerState::kLive;
      },
      milliseconds(5000)));
}

}  // namespace
}  // namespace memcoord::coordinator
