// The `memcoord` command-line contracts for the coordinator: `memcoord coordinator` serves until SIGTERM,
// `status --json`, `trim --now --json` and `quota set` talk to it, bad input exits 2 and unknown ranks 1
// with the coordinator's message; `plan --coordinator` plans on live memory. Real processes throughout (the
// binary, the test worker).
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "coordinator_fixtures.h"
#include "test_support.h"

namespace memcoord {
namespace {

using memcoord::testing::Child;
using memcoord::testing::ListeningAddress;
using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

// Runs the memcoord binary to completion; returns its exit code and fills `output` (stdout and stderr).
int Memcoord(const std::vector<std::string>& args, std::string* output) {
  std::vector<std::string> argv = {MEMCOORD_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child(argv, {});
  const int code = child.wait(milliseconds(20000));
  *output = child.output();
  return code;
}

TEST(MemcoordCli, CoordinatorStatusTrimAndQuota) {
  Child coordinator({MEMCOORD_CLI, "coordinator", "--listen", "127.0.0.1:0"}, {});
  const std::string address = ListeningAddress(coordinator);
  ASSERT_FALSE(address.empty()) << coordinator.output();
  Child worker({MEMCOORD_TEST_WORKER, "--until-abort", "--steps", "0", "--step-ms", "10", "--alloc", "4MiB"},
               {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=0", "MEMCOORD_WORLD_SIZE=1"});

  std::string out;
  nlohmann::json status;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (Memcoord({"status", "--coordinator", address, "--json"}, &out) != 0) return false;
        status = nlohmann::json::parse(out, nullptr, false);
        return !status.is_discarded() && status["workers"].size() == 1 &&
               status["workers"][0]["pools"].size() == 1 &&
               status["workers"][0]["pools"][0]["reserved_bytes"].get<std::uint64_t>() > 0;
      },
      milliseconds(10000)))
      << out;
  EXPECT_EQ(status["workers"][0]["state"], "live");
  EXPECT_EQ(status["workers"][0]["backend"], "host");

  ASSERT_EQ(Memcoord({"status", "--coordinator", address}, &out), 0);
  EXPECT_NE(out.find("RANK"), std::string::npos);
  EXPECT_NE(out.find("default"), std::string::npos);

  ASSERT_EQ(Memcoord({"trim", "--coordinator", address, "--now", "--json"}, &out), 0) << out;
  auto trim = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(trim.is_discarded()) << out;
  EXPECT_TRUE(trim["complete"].get<bool>());
  EXPECT_GT(trim["released_bytes"].get<std::uint64_t>(), 0u);

  ASSERT_EQ(Memcoord({"trim", "--coordinator", address, "--json"}, &out), 0) << out;
  trim = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(trim.is_discarded()) << out;
  EXPECT_EQ(trim["acks"][0]["step"], trim["step"]);

  ASSERT_EQ(
      Memcoord({"quota", "set", "--coordinator", address, "--rank", "0", "--pool", "default", "64MiB"}, &out),
      0)
      << out;
  EXPECT_EQ(
      Memcoord({"quota", "set", "--coordinator", address, "--rank", "0", "--pool", "default", "-5"}, &out),
      2);
  EXPECT_NE(out.find("INVALID_ARGUMENT"), std::string::npos) << out;
  EXPECT_EQ(
      Memcoord({"quota", "set", "--coordinator", address, "--rank", "9", "--pool", "default", "1MiB"}, &out),
      1);
  EXPECT_NE(out.find("NOT_FOUND"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"status", "--coordinator", "127.0.0.1:1"}, &out), 1);
  EXPECT_NE(out.find("UNAVAILABLE"), std::string::npos) << out;
  // Not an address (gRPC would wrap the port to 34463): a usage error before any call.
  EXPECT_EQ(Memcoord({"status", "--coordinator", "127.0.0.1:99999"}, &out), 2);
  EXPECT_NE(out.find("'127.0.0.1:99999' is not a coordinator address"), std::string::npos) << out;
  // A pool or group name no worker can have is a usage error, not an empty INTERNAL from the wire format.
  EXPECT_EQ(Memcoord({"trim", "--coordinator", address, "--now", "--pool", "\xff\xfe"}, &out), 2);
  EXPECT_NE(out.find("--pool: pool name '\\xff\\xfe' is not valid UTF-8"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"trim", "--coordinator", address, "--group", "a\x01"}, &out), 2);
  EXPECT_NE(out.find("--group: group name"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"quota", "set", "--coordinator", address, "--rank", "0", "--pool", "", "1MiB"}, &out),
            2);
  EXPECT_NE(out.find("is empty"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"coordinator", "--listen", "127.0.0.1:99999"}, &out), 2);
  EXPECT_NE(out.find("must be a number from 0 to 65535"), std::string::npos) << out;

  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(milliseconds(5000)), 0) << coordinator.output();
  worker.signal(SIGKILL);
}

// `memcoord plan FILE --coordinator ADDR`: the plan lands on the live worker's measured free memory.
TEST(MemcoordCli, PlanOnLiveMemory) {
  Child coordinator({MEMCOORD_CLI, "coordinator", "--listen", "127.0.0.1:0"}, {});
  const std::string address = ListeningAddress(coordinator);
  ASSERT_FALSE(address.empty()) << coordinator.output();
  const std::string fits = ::testing::TempDir() + "plan-fits.json";
  const std::string too_big = ::testing::TempDir() + "plan-too-big.json";
  std::ofstream(fits) << R"({"models": [{"preset": "gpt2", "mode": "inference"}]})";
  std::ofstream(too_big) << R"({"models": [{"preset": "gpt2-xl", "mode": "training"}]})";

  std::string out;
  EXPECT_EQ(Memcoord({"plan", fits, "--coordinator", address}, &out), 1) << out;  // no live workers
  EXPECT_NE(out.find("FAILED_PRECONDITION"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"plan", fits, "--token-file", "/nonexistent"}, &out), 2) << out;

  Child worker({MEMCOORD_TEST_WORKER, "--until-abort", "--steps", "0", "--step-ms", "10"},
               {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=0", "MEMCOORD_WORLD_SIZE=1"});
  nlohmann::json plan;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (Memcoord({"plan", fits, "--coordinator", address, "--json"}, &out) != 0) return false;
        plan = nlohmann::json::parse(out, nullptr, false);
        return !plan.is_discarded();
      },
      milliseconds(10000)))
      << out;
  EXPECT_TRUE(plan["feasible"].get<bool>());
  ASSERT_EQ(plan["live_devices"].size(), 1u);
  EXPECT_EQ(plan["live_devices"][0]["ranks"][0], 0);
  EXPECT_LE(plan["device_loads_bytes"][0].get<std::uint64_t>(),
            plan["live_devices"][0]["free_bytes"].get<std::uint64_t>());
  EXPECT_EQ(Memcoord({"plan", fits, "--coordinator", address}, &out), 0) << out;
  EXPECT_NE(out.find("busiest"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"plan", too_big, "--coordinator", address}, &out), 1) << out;
  EXPECT_NE(out.find("infeasible"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"plan", "/nonexistent.json", "--coordinator", address}, &out), 2) << out;
  EXPECT_EQ(Memcoord({"plan", fits, "--coordinator", "127.0.0.1:1"}, &out), 1) << out;

  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(milliseconds(5000)), 0) << coordinator.output();
  worker.signal(SIGKILL);
}

}  // namespace
}  // namespace memcoord
