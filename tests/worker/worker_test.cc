#include "worker/worker.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/coordinator_address.h"

namespace memcoord {
namespace {

using std::chrono::milliseconds;

TEST(Worker, TrainingNeverBlocksWithoutACoordinator) {
  WorkerOptions options;
  options.coordinator = "127.0.0.1:1";  // nothing listens there: the session keeps retrying
  options.backend = "host";
  options.capacity_bytes = 256 << 20;
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  PoolOptions po;
  po.name = "default";
  auto pool = (*worker)->create_pool(po);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*worker)->create_pool(po).status().code(), StatusCode::kAlreadyExists);
  const auto start = std::chrono::steady_clock::now();
  for (int step = 0; step < 200; ++step) {
    (*worker)->step_begin();
    auto block = (*pool)->allocate(1 << 20);
    ASSERT_TRUE(block.ok());
    ASSERT_TRUE((*pool)->deallocate(*block).ok());
    ASSERT_TRUE((*worker)->step_end().ok());
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, milliseconds(500));
  EXPECT_EQ((*worker)->step(), 200);
  EXPECT_FALSE((*worker)->attached());
  EXPECT_EQ((*worker)->device(), -1);
  const auto stop = std::chrono::steady_clock::now();
  (*worker)->shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, milliseconds(1000));
}

TEST(Worker, EachSimulatedDeviceHasItsOwnDefaultPoolAndBackend) {
  WorkerOptions options;
  options.backend = "host";
  options.capacity_bytes = 256 << 20;
  options.simulated_devices = 2;
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ((*worker)->device_count(), 2);
  EXPECT_EQ((*worker)->primary_device(), 0);
  auto d0 = (*worker)->device_pool(0);
  auto d1 = (*worker)->device_pool(1);
  ASSERT_TRUE(d0.ok() && d1.ok());
  EXPECT_EQ((*d0)->name(), "default");
  EXPECT_EQ((*d1)->name(), "default@1");
  EXPECT_NE(&(*d0)->backend(), &(*d1)->backend());  // one backend per device
  EXPECT_EQ(*(*worker)->device_pool(-1), *d0);      // -1: the primary device
  EXPECT_EQ(*(*worker)->device_pool(1), *d1);       // made once
  EXPECT_EQ((*worker)->pool("default@1"), *d1);
  const auto listed = (*worker)->pools_with_devices();
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[1], std::make_pair(1, *d1));
  const Status bad = (*worker)->device_pool(2).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("MEMCOORD_DEVICES"), std::string::npos) << bad.ToString();
  options.simulated_devices = 65;
  EXPECT_EQ(Worker::init(options).status().code(), StatusCode::kInvalidArgument);
}

TEST(Worker, BadOptionsAreRefused) {
  WorkerOptions options;
  options.backend = "quantum";
  options.topology = Topology{};
  EXPECT_EQ(Worker::init(options).status().code(), StatusCode::kInvalidArgument);
  options.backend = "host";
  options.report_interval = milliseconds(0);
  EXPECT_EQ(Worker::init(options).status().code(), StatusCode::kInvalidArgument);
}

// A coordinator address that cannot be one fails init naming where it came from; one that is well formed
// but unreachable does not (the coordinator may start later).
TEST(Worker, AMalformedCoordinatorAddressFailsInit) {
  WorkerOptions options;
  options.backend = "host";
  options.topology = Topology{};
  for (const char* good : {"127.0.0.1:1", "node-1.cluster:7777", "[::1]:7777", "unix:/tmp/memcoord.sock",
                           "dns:///coordinator:7777"}) {
    EXPECT_TRUE(CheckCoordinatorAddress(good, "test").ok()) << good;
  }
  for (const char* bad : {"garbage", "host:notaport", ":7777", "host:", "host:0", "host:65536", "::1:7777",
                          "a b:7777", "[::1]", "dns:"}) {
    const Status status = CheckCoordinatorAddress(bad, "MEMCOORD_COORDINATOR");
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(status.message().find(std::string("MEMCOORD_COORDINATOR '") + bad + "'"), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("accepted: HOST:PORT"), std::string::npos) << status.message();
  }
  options.coordinator = "garbage";
  auto refused = Worker::init(options);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("WorkerOptions::coordinator 'garbage'"), std::string::npos)
      << refused.status().message();
  options.coordinator.clear();
  setenv("MEMCOORD_COORDINATOR", "host:notaport", 1);
  refused = Worker::init(options);
  unsetenv("MEMCOORD_COORDINATOR");
  EXPECT_NE(refused.status().message().find("MEMCOORD_COORDINATOR 'host:notaport'"), std::string::npos)
      << refused.status().message();
}

// Pool names reach the coordinator (protobuf strings: UTF-8 only), JSON and status tables.
TEST(Worker, PoolNamesMustBeShortUtf8TextWithoutControlCharacters) {
  WorkerOptions options;
  options.backend = "host";
  options.topology = Topology{};
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  for (const std::string& good : std::vector<std::string>{"kv", "kv\"cache", "caché", "активации", "模型-1",
                                                          "🙂", std::string(128, 'x')}) {
    EXPECT_TRUE((*worker)->create_pool((*worker)->pool_options(good)).ok()) << good;
  }
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "is empty"},
      {std::string(129, 'x'), "is 129 bytes long"},
      {"\xff", "not valid UTF-8 at byte 0"},
      {"ok\xc3", "not valid UTF-8 at byte 2"},        // cut short
      {"\xc0\xaf", "not valid UTF-8 at byte 0"},      // overlong '/'
      {"\xed\xa0\x80", "not valid UTF-8 at byte 0"},  // a surrogate
      {"\xf4\x90\x80\x80", "not valid UTF-8"},        // past U+10FFFF
      {"a\nb", "control character at byte 1"},
      {std::string("a\0b", 3), "control character at byte 1"},
  };
  for (const auto& [name, why] : bad) {
    auto made = (*worker)->create_pool((*worker)->pool_options(name));
    ASSERT_EQ(made.status().code(), StatusCode::kInvalidArgument) << why;
    EXPECT_NE(made.status().message().find(why), std::string::npos) << made.status().message();
    EXPECT_NE(made.status().message().find("accepted: 1 to 128 bytes of UTF-8"), std::string::npos);
  }
  EXPECT_NE((*worker)->create_pool((*worker)->pool_options("\xff")).status().message().find("'\\xff'"),
            std::string::npos);  // shown escaped
}

// WorkerOptions::alloc_conf, else $MEMCOORD_ALLOC_CONF, sets the options of the pools the worker makes:
// device pools (every device's), and pool_options() for the C ABI's; a bad conf refuses init naming where it
// came from.
TEST(Worker, AllocConfSetsTheOptionsOfThePoolsItMakes) {
  setenv("MEMCOORD_ALLOC_CONF", "thread_cache:64KiB", 1);
  WorkerOptions options;
  options.backend = "virtual";
  options.simulated_devices = 2;
  options.topology = Topology{0, 0, 1, "test"};
  auto from_env = Worker::init(options);
  ASSERT_TRUE(from_env.ok()) << from_env.status().ToString();
  EXPECT_EQ((*from_env)->pool_options("x").thread_cache_bytes, 64u << 10);
  EXPECT_EQ((*from_env)->pool_options("x").name, "x");
  (*from_env)->shutdown();

  options.alloc_conf = "large_map_unit:2MiB";  // the option wins over the environment
  auto worker = Worker::init(options);
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ((*worker)->pool_options("x").thread_cache_bytes, PoolOptions{}.thread_cache_bytes);
  for (int device : {0, 1}) {
    auto pool = (*worker)->device_pool(device);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    auto block = (*pool)->allocate(30 << 20);
    ASSERT_TRUE(block.ok()) << block.status().ToString();
    // 30 MiB grows on to 40 (the default 20 MiB step, PoolOptions::large_grow_step_bytes) in 2 MiB units.
    EXPECT_EQ((*pool)->stats().backend_allocations, 20u) << "device " << device << ": 2 MiB units";
    ASSERT_TRUE((*pool)->deallocate(*block).ok());
  }
  (*worker)->shutdown();

  options.alloc_conf = "growth:sideways";
  Status bad = Worker::init(options).status();
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("alloc_conf: alloc conf entry 'growth:sideways'"), std::string::npos)
      << bad.ToString();
  options.alloc_conf.clear();
  setenv("MEMCOORD_ALLOC_CONF", "thread_cache", 1);
  bad = Worker::init(options).status();
  EXPECT_NE(bad.message().find("MEMCOORD_ALLOC_CONF: alloc conf entry 'thread_cache'"), std::string::npos)
      << bad.ToString();
  unsetenv("MEMCOORD_ALLOC_CONF");
}

}  // namespace
}  // namespace memcoord
