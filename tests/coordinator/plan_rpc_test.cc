// The Plan RPC over real gRPC on loopback: the planner runs on the free memory that live workers (host
// backend, each its own simulated device) measured and reported; bad requests and an empty cluster get
// the right codes.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

constexpr std::uint64_t kMiB = 1ull << 20;

std::unique_ptr<Worker> StartSizedWorker(const std::string& address, int rank, int world,
                                         std::uint64_t capacity_bytes) {
  WorkerOptions options;
  options.coordinator = address;
  options.backend = "host";
  options.capacity_bytes = capacity_bytes;
  options.report_interval = milliseconds(50);
  options.topology = Topology{rank, rank, world, "test"};
  auto worker = Worker::init(options);
  if (!worker.ok()) return nullptr;
  PoolOptions pool;
  pool.name = "default";
  if (!(*worker)->create_pool(pool).ok()) return nullptr;
  return *std::move(worker);
}

CoordinatorClient Client(const CoordinatorServer& server) {
  ClientOptions options;
  options.address = server.address();
  return CoordinatorClient(options);
}

TEST(PlanRpc, PlacesLayersOnLiveFreeMemory) {
  auto server = CoordinatorServer::Start({});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::vector<std::uint64_t> capacities = {1024 * kMiB, 768 * kMiB, 640 * kMiB};
  std::vector<std::unique_ptr<Worker>> workers;
  for (int r = 0; r < 3; ++r) {
    workers.push_back(StartSizedWorker((*server)->address(), r, 3, capacities[r]));
    ASSERT_TRUE(workers.back());
  }
  // Rank 0 holds 128 MiB, so its free memory is below its capacity.
  auto held = workers[0]->pool("default")->allocate(128 * kMiB);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  auto client = Client(**server);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto view = client.GetCluster();
        if (!view.ok() || view->workers.size() != 3) return false;
        for (const auto& w : view->workers) {
          const std::uint64_t expected = capacities[w.id.rank] - (w.id.rank == 0 ? 128 * kMiB : 0);
          if (w.reports == 0 || w.device_free_bytes > expected) return false;
        }
        return true;
      },
      milliseconds(5000)));

  // A step-end report (the latest now) carries the last measured free memory too.
  for (auto& w : workers) {
    w->step_begin();
    ASSERT_TRUE(w->step_end().ok());
  }
  auto plan = client.Plan(R"({"models": [{"preset": "gpt2-medium", "mode": "inference"}]})");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->feasible) << plan->reason;
  ASSERT_EQ(plan->devices.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    const LiveDevice& d = plan->devices[r];
    EXPECT_EQ(d.ranks, std::vector<int>{r});
    EXPECT_EQ(d.device, -1);
    EXPECT_NE(d.name.find(":sim" + std::to_string(r) + " (rank " + std::to_string(r) + ")"),
              std::string::npos)
        << d.name;
    EXPECT_EQ(d.capacity_bytes, d.free_bytes);
    EXPECT_GT(d.free_bytes, 0u);
    EXPECT_LE(d.free_bytes, capacities[r]);
    EXPECT_EQ(d.total_bytes, capacities[r]);
  }
  EXPECT_LE(plan->devices[0].free_bytes, capacities[0] - 128 * kMiB);

  nlohmann::json j = nlohmann::json::parse(plan->plan_json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << plan->plan_json;
  ASSERT_EQ(j["devices"].size(), 3u);
  const auto& loads = j["device_loads_bytes"];
  ASSERT_EQ(loads.size(), 3u);
  int used = 0;
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["devices"][i]["name"], plan->devices[i].name);
    EXPECT_EQ(j["devices"][i]["capacity_bytes"].get<std::uint64_t>(), plan->devices[i].free_bytes);
    EXPECT_LE(loads[i].get<std::uint64_t>(), plan->devices[i].free_bytes);
    used += loads[i].get<std::uint64_t>() > 0 ? 1 : 0;
  }
  EXPECT_GE(used, 2);  // gpt2-medium fp32 (~1.4 GB) fits on no single device: it is split by layers
  EXPECT_EQ(j["models"][0]["split"], "layers");
  EXPECT_NE(plan->plan_table.find("busiest"), std::string::npos);

  // Too large for what is free: OK with the planner's reason, not an error.
  auto big = client.Plan(R"({"models": [{"preset": "gpt2-xl", "mode": "training"}]})");
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_FALSE(big->feasible);
  EXPECT_FALSE(big->reason.empty());
  EXPECT_NE(big->plan_table.find("infeasible"), std::string::npos);
  (void)workers[0]->pool("default")->deallocate(*held);
}

TEST(PlanRpc, BadRequestNamesTheField) {
  auto server = CoordinatorServer::Start({});
  ASSERT_TRUE(server.ok());
  auto client = Client(**server);
  auto plan = client.Plan(R"({"models": [{"preset": "gpt2", "precision": "fp7"}]})");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("models[0].precision"), std::string::npos)
      << plan.status().message();
  plan = client.Plan("{not json");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  // 70,000 levels deep (140 KB): the coordinator used to overflow its stack printing it back.
  plan = client.Plan(R"({"models": [{"preset": "gpt2", "precision": )" + std::string(70000, '[') +
                     std::string(70000, ']') + "}]}");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("70003 levels deep; at most 64"), std::string::npos)
      << plan.status().message();
  // A long bad value is quoted short, so the error fits in gRPC's metadata and reaches the client.
  plan = client.Plan(R"({"models": [{"preset": "gpt2", "batch": ")" + std::string(100000, 'x') + R"("}]})");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument) << plan.status().message().substr(0, 200);
  EXPECT_LT(plan.status().message().size(), 1000u);
  auto status = client.GetCluster();  // and the coordinator still serves
  EXPECT_TRUE(status.ok()) << status.status().ToString();
}

TEST(PlanRpc, NoLiveWorkersIsFailedPreconditionUnlessDevicesAreGiven) {
  auto server = CoordinatorServer::Start({});
  ASSERT_TRUE(server.ok());
  auto client = Client(**server);
  auto plan = client.Plan(R"({"models": [{"preset": "gpt2", "mode": "inference"}]})");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kFailedPrecondition) << plan.status().ToString();
  // With "devices" the coordinator plans on them as given.
  plan = client.Plan(R"({"devices": {"count": 2, "capacity": "24GB"},
                          "models": [{"preset": "gpt2", "mode": "inference"}]})");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->feasible);
  EXPECT_TRUE(plan->devices.empty());
  EXPECT_NE(plan->plan_json.find("\"gpu1\""), std::string::npos);
}

}  // namespace
}  // namespace memcoord::coordinator
