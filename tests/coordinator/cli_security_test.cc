// The `memcoord` binary's security contract: `memcoord coordinator` refuses a non-loopback address without
// a token (exit 2, naming the address and the flags) and warns loudly with --insecure; with a worker and an
// admin token, `status` works with the worker token, `trim`/`quota` with the worker token exit 1 with
// PERMISSION_DENIED naming the admin token, and work with --admin-token-file or MEMCOORD_ADMIN_TOKEN_FILE;
// no token is UNAUTHENTICATED. TLS flags on both sides with real certificates.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "test_support.h"

namespace memcoord {
namespace {

using memcoord::testing::Child;
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

// Waits for "listening on ADDR" in the coordinator's output; empty when it never came.
std::string ListeningAddress(Child& coordinator) {
  std::string address;
  WaitFor(
      [&] {
        std::smatch m;
        const std::string out = coordinator.output();
        if (!std::regex_search(out, m, std::regex(R"(listening on ([0-9.]+:\d+))"))) return false;
        address = m[1];
        return true;
      },
      milliseconds(10000));
  return address;
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
  const std::string dir = ::testing::TempDir() + "cli-sec-tls";
  const std::string script =
      "rm -rf " + dir + " && mkdir -p " + dir + " && cd " + dir +
      " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca"
      " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=coordinator"
      " -addext subjectAltName=IP:127.0.0.1"
      " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 1"
      " -copy_extensions copyall"
      " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=admin"
      " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1";
  if (std::system(("(" + script + ") >/dev/null 2>&1").c_str()) != 0) GTEST_SKIP() << "openssl 3.x needed";
  Child coordinator(
      {MEMCOORD_CLI, "coordinator", "--listen", "127.0.0.1:0", "--tls-cert", dir + "/server.pem", "--tls-key",
       dir + "/server.key", "--tls-client-ca", dir + "/ca.pem"},
      {});
  const std::string address = ListeningAddress(coordinator);
  ASSERT_FALSE(address.empty()) << coordinator.output();
  std::string out;
  const std::vector<std::string> mutual = {"MEMCOORD_TLS_CA=" + dir + "/ca.pem",
                                           "MEMCOORD_TLS_CERT=" + dir + "/client.pem",
                                           "MEMCOORD_TLS_KEY=" + dir + "/client.key"};
  EXPECT_EQ(Memcoord({"status", "--coordinator", address, "--json"}, mutual, &out), 0) << out;
  EXPECT_EQ(
      Memcoord({"status", "--coordinator", address, "--json"}, {"MEMCOORD_TLS_CA=" + dir + "/ca.pem"}, &out),
      1)
      << out;
  EXPECT_EQ(Memcoord({"status", "--coordinator", address, "--json"}, {}, &out), 1) << out;
  EXPECT_EQ(
      Memcoord({"status", "--coordinator", address}, {"MEMCOORD_TLS_CERT=" + dir + "/client.pem"}, &out), 2);
  EXPECT_NE(out.find("MEMCOORD_TLS_KEY"), std::string::npos) << out;
  EXPECT_EQ(Memcoord({"coordinator", "--listen", "127.0.0.1:0", "--tls-cert", dir + "/server.pem"}, {}, &out),
            2);
  EXPECT_NE(out.find("--tls-key"), std::string::npos) << out;
  coordinator.signal(SIGTERM);
  EXPECT_EQ(coordinator.wait(milliseconds(5000)), 0) << coordinator.output();
}

}  // namespace
}  // namespace memcoord
