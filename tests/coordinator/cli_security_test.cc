// The `memcoord` binary's security contract: `memcoord coordinator` refuses a non-loopback address without
// a token (exit 2, naming the address and the flags) and warns loudly with --insecure; with a worker and an
// admin token, `status` works with the worker token, `trim`/`quota` with the worker token exit 1 with
// PERMISSION_DENIED naming the admin token, and work with --admin-token-file or MEMCOORD_ADMIN_TOKEN_FILE;
// no token is UNAUTHENTICATED. TLS flags on both sides with real certificates.
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

int Memcoord(const std::vector<std::string>& args, const std::vector<std::string>& env, std::string* output) {
  std::vector<std::string> argv = {MEMCOORD_CLI};
  argv.insert(argv.end(), args.begin(), args.end());
  Child child(argv, env);
  const int code = child.wait(milliseconds(20000));
  *output = child.output();
  return code;
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text << "\n";
  return path;
}

TEST(MemcoordCliSecurity, NonLoopbackNeedsATokenOrInsecureWhichWarns) {
  std::string out;
  EXPECT_EQ(Memcoord({"coordinator", "--listen", "0.0.0.0:0"}, {}, &out), 2) << out;
  EXPECT_NE(out.find("refusing to listen on '0.0.0.0:0'"), std::string::npos) << out;
  EXPECT_NE(out.find("--token-file"), std::string::npos) << out;
  EXPECT_NE(out.find("--admin-token-file"), std::string::npos) << out;
  EXPECT_NE(out.find("--insecure"), std::string::npos) << out;

  Child insecure({MEMCOORD_CLI, "coordinator", "--listen", "0.0.0.0:0", "--insecure"}, {});
  EXPECT_FALSE(ListeningAddress(insecure).empty()) << insecure.output();
  EXPECT_NE(insecure.output().find("WITHOUT AUTHENTICATION"), std::string::npos) << insecure.output();
  insecure.signal(SIGTERM);
  EXPECT_EQ(insecure.wait(milliseconds(5000)), 0);

  const std::string token = WriteFile("cli-sec-worker.token", "w-123");
  Child locked({MEMCOORD_CLI, "coordinator", "--listen", "0.0.0.0:0", "--token-file", token}, {});
  EXPECT_FALSE(ListeningAddress(locked).empty()) << locked.output();
  EXPECT_EQ(locked.output().find("WITHOUT AUTHENTICATION"), std::string::npos) << locked.output();
  locked.signal(SIGTERM);
  EXPECT_EQ(locked.wait(milliseconds(5000)), 0);

  EXPECT_EQ(Memcoord({"coordinator", "--listen", "127.0.0.1:0", "--max-message-size", "lots"}, {}, &out), 2);
  EXPECT_NE(out.find("--max-message-size"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"coordinator", "--listen", "127.0.0.1:0", "--max-watches", "0"}, {}, &out), 2);
  EXPECT_NE(out.find("--max-watches must be at least 1"), std::string::npos) << out;
  EXPECT_EQ(
      Memcoord({"coordinator", "--listen", "127.0.0.1:0", "--token-file", token, "--admin-token-file", token},
               {}, &out),
      2);
  EXPECT_NE(out.find("are the same"), std::string::npos) << out;
}

TEST(MemcoordCliSecurity, WorkerTokenReadsAdminTokenTrimsAndSetsQuotas) {
  const std::string worker_token = WriteFile("cli-sec-w.token", "worker-secret");
  const std::string admin_token = WriteFile("cli-sec-a.token", "admin-secret");
  Child coordinator({MEMCOORD_CLI, "coordinator", "--listen", "127.0.0.1:0", "--token-file", worker_token,
                     "--admin-token-file", admin_token},
                    {});
  const std::string address = ListeningAddress(coordinator);
  ASSERT_FALSE(address.empty()) << coordinator.output();
  Child worker({MEMCOORD_TEST_WORKER, "--until-abort", "--steps", "0", "--step-ms", "10", "--alloc", "4MiB"},
               {"MEMCOORD_COORDINATOR=" + address, "MEMCOORD_RANK=0", "MEMCOORD_WORLD_SIZE=1",
                "MEMCOORD_TOKEN_FILE=" + worker_token});
  std::string out;
  ASSERT_TRUE(WaitFor(
      [&] {
        if (Memcoord({"status", "--coordinator", address, "--json", "--token-file", worker_token}, {},
                     &out) != 0)
          return false;
        auto status = nlohmann::json::parse(out, nullptr, false);
        return !status.is_discarded() && status["workers"].size() == 1;
      },
      milliseconds(10000)))
      << out;

  EXPECT_EQ(Memcoord({"status", "--coordinator", address}, {}, &out), 1) << out;
  EXPECT_NE(out.find("UNAUTHENTICATED"), std::string::npos) << out;

  EXPECT_EQ(
      Memcoord({"trim", "--coordinator", address, "--now"}, {"MEMCOORD_TOKEN_FILE=" + worker_token}, &out),
      1);
  EXPECT_NE(out.find("PERMISSION_DENIED"), std::string::npos) << out;
  EXPECT_NE(out.find("Trim needs the admin token"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"quota", "set", "--coordinator", address, "--token-file", worker_token, "--rank", "0",
                      "--pool", "default", "64MiB"},
                     {}, &out),
            1);
  EXPECT_NE(out.find("SetQuota needs the admin token"), std::string::npos) << out;

  EXPECT_EQ(
      Memcoord({"trim", "--coordinator", address, "--now", "--admin-token-file", admin_token}, {}, &out), 0)
      << out;
  EXPECT_EQ(
      Memcoord({"quota", "set", "--coordinator", address, "--rank", "0", "--pool", "default", "64MiB"},
               {"MEMCOORD_TOKEN_FILE=" + worker_token, "MEMCOORD_ADMIN_TOKEN_FILE=" + admin_token}, &out),
      0)
      << out;
  const std::string plan =
      WriteFile("cli-sec-plan.json", R"({"models": [{"preset": "gpt2", "mode": "inference"}]})");
  EXPECT_EQ(Memcoord({"plan", plan, "--coordinator", address, "--token-file", worker_token}, {}, &out), 1);
  EXPECT_NE(out.find("Plan needs the admin token"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"plan", plan, "--coordinator", address, "--admin-token-file", admin_token}, {}, &out),
            0)
      << out;

  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(milliseconds(5000)), 0) << coordinator.output();
  worker.signal(SIGKILL);
}

TEST(MemcoordCliSecurity, TlsFlagsOnTheCoordinatorAndTheVariablesOnTheClient) {
  const memcoord::testing::TestCertificates certs;
  if (!certs.ok()) GTEST_SKIP() << "openssl 3.x needed";
  const auto file = [&](const char* name) { return certs.path(name); };
  Child coordinator({MEMCOORD_CLI, "coordinator", "--listen", "127.0.0.1:0", "--tls-cert", file("server.pem"),
                     "--tls-key", file("server.key"), "--tls-client-ca", file("ca.pem")},
                    {});
  const std::string address = ListeningAddress(coordinator);
  ASSERT_FALSE(address.empty()) << coordinator.output();
  std::string out;
  const std::vector<std::string> mutual = {"MEMCOORD_TLS_CA=" + file("ca.pem"),
                                           "MEMCOORD_TLS_CERT=" + file("client.pem"),
                                           "MEMCOORD_TLS_KEY=" + file("client.key")};
  EXPECT_EQ(Memcoord({"status", "--coordinator", address, "--json"}, mutual, &out), 0) << out;
  EXPECT_EQ(
      Memcoord({"status", "--coordinator", address, "--json"}, {"MEMCOORD_TLS_CA=" + file("ca.pem")}, &out),
      1)
      << out;
  EXPECT_EQ(Memcoord({"status", "--coordinator", address, "--json"}, {}, &out), 1) << out;
  EXPECT_EQ(Memcoord({"status", "--coordinator", address}, {"MEMCOORD_TLS_CERT=" + file("client.pem")}, &out),
            2);
  EXPECT_NE(out.find("MEMCOORD_TLS_KEY"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"coordinator", "--listen", "127.0.0.1:0", "--tls-cert", file("server.pem")}, {}, &out),
            2);
  EXPECT_NE(out.find("--tls-key"), std::string::npos) << out;
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(milliseconds(5000)), 0) << coordinator.output();
}

}  // namespace
}  // namespace memcoord
