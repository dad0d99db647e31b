// Service-level contracts over a real gRPC coordinator on loopback: the bootstrap store is write-once, and
// a pool without a quota that runs the device out of memory is helped (peers' idle cache released) but
// never capped.
#include <gtest/gtest.h>

#include "common/bytes.h"
#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::WaitFor;
using memcoord::testing::WaitForPools;
using std::chrono::milliseconds;

struct Running {
  Running() {
    auto started = CoordinatorServer::Start(CoordinatorOptions{});
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    server = *std::move(started);
    ClientOptions options;
    options.address = server->address();
    client = std::make_unique<CoordinatorClient>(options);
  }
  std::unique_ptr<CoordinatorServer> server;
  std::unique_ptr<CoordinatorClient> client;
};

TEST(ServiceContract, PutIsWriteOnceAndTheSameValueAgainIsOk) {
  Running r;
  ASSERT_TRUE(r.client->Put("nccl/round0/root", "id-A").ok());
  EXPECT_TRUE(r.client->Put("nccl/round0/root", "id-A").ok())
      << "a retried Put of the same value is harmless";
  Status second = r.client->Put("nccl/round0/root", "id-B");
  EXPECT_EQ(second.code(), StatusCode::kAlreadyExists) << second.ToString();
  EXPECT_NE(second.message().find("nccl/round0/root"), std::string::npos) << second.message();
  auto value = r.client->Get("nccl/round0/root", 0);
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "id-A") << "a refused Put changes nothing";
}

TEST(ServiceContract, APoolWithoutQuotaThatRunsTheDeviceOutIsHelpedNotCapped) {
  Running r;
  // One worker on a 64 MiB simulated device; a and b get quotas from a 48 MiB budget, c comes later
  // without one.
  WorkerOptions options;
  options.coordinator = r.server->address();
  options.backend = "host";
  options.capacity_bytes = 64 * kMiB;
  options.report_interval = milliseconds(50);
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  for (const char* name : {"a", "b"}) ASSERT_TRUE((*worker)->create_pool(PoolOptions{.name = name}).ok());
  ASSERT_TRUE(WaitFor([&] { return (*worker)->attached(); }, milliseconds(3000)));
  ASSERT_TRUE(WaitForPools(*r.client, 0, 2));
  ASSERT_TRUE(r.client->SetQuota(0, "", 48 * kMiB).ok());
  CachingPool* a = (*worker)->pool("a");
  CachingPool* b = (*worker)->pool("b");
  ASSERT_EQ(a->stats().limit_bytes, 24 * kMiB);
  auto c_made = (*worker)->create_pool(PoolOptions{.name = "c"});
  ASSERT_TRUE(c_made.ok());
  CachingPool* c = *c_made;
  // a and b fill the rest of the device with idle cache.
  for (CachingPool* pool : {a, b}) {
    auto block = pool->allocate(24 * kMiB);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    ASSERT_TRUE(pool->deallocate(*block).ok());
  }
  auto live = c->allocate(16 * kMiB);
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto v = r.client->GetCluster();
        return v.ok() && v->workers.size() == 1 && v->workers[0].pools.size() == 3;
      },
      milliseconds(3000)));
  // The device is full: c's next allocation fails in the backend and c asks the coordinator. Before, c got
  // a "quota" of its live bytes plus the request (24 MiB) and every later allocation was an OOM.
  auto more = c->allocate(8 * kMiB);
  ASSERT_TRUE(more.ok()) << more.status().ToString();
  EXPECT_EQ(c->stats().limit_bytes, 0u) << "a pool without a quota must not be capped";
  EXPECT_LT(a->stats().reserved_bytes + b->stats().reserved_bytes, 48 * kMiB) << "peers released cache";
  auto again = c->allocate(8 * kMiB);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
  (void)c->deallocate(*live);
  (void)c->deallocate(*more);
  if (again.ok()) (void)c->deallocate(*again);
}

}  // namespace
}  // namespace memcoord::coordinator
