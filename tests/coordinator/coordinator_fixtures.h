// What the coordinator's TLS, security and CLI tests all set up: test certificates made with openssl, and a
// coordinator started in this process (StartServer) or as `memcoord coordinator` (ListeningAddress of its
// Child). Test-only; not thread-safe (each test makes its own).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "test_support.h"

namespace memcoord::testing {

// A fresh temporary folder with, made by the openssl command (3.x, for -copy_extensions):
//   ca.pem, ca.key            a CA (CN test-ca), and ca.srl, its serial file (not a PEM file);
//   server.pem, server.key    the coordinator's certificate (CN coordinator, SAN IP:127.0.0.1), CA-signed;
//   client.pem, client.key    a client certificate (CN admin), CA-signed;
//   other-ca.pem, other-ca.key a second CA that signed nothing (the "wrong client CA" case).
// ok() is false when openssl is missing or failed: callers GTEST_SKIP. The folder is removed with the object.
class TestCertificates {
 public:
  TestCertificates() {
    char dir_template[] = "/tmp/memcoord-test-certs-XXXXXX";
    if (::mkdtemp(dir_template) == nullptr) return;
    dir_ = dir_template;
    const std::string script =
        "cd " + dir_ +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca"
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days 1"
        " -subj /CN=other-ca"
        " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=coordinator"
        " -addext subjectAltName=IP:127.0.0.1"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem"
        " -days 1 -copy_extensions copyall"
        " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=admin"
        " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem"
        " -days 1";
    ok_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  }
  ~TestCertificates() {
    if (!dir_.empty()) (void)std::system(("rm -rf " + dir_).c_str());
  }
  TestCertificates(const TestCertificates&) = delete;
  TestCertificates& operator=(const TestCertificates&) = delete;

  bool ok() const { return ok_; }
  // The path of `name` in the folder ("ca.pem").
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  // The text of `name` ("" when it cannot be read).
  std::string pem(const std::string& name) const {
    std::ifstream in(path(name));
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  std::string dir_;
  bool ok_ = false;
};

// A coordinator in this process on 127.0.0.1 (any port); a failed start is a test failure and nullptr.
inline std::unique_ptr<coordinator::CoordinatorServer> StartServer(
    const coordinator::CoordinatorOptions& options = {}) {
  auto server = coordinator::CoordinatorServer::Start(options);
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  return server.ok() ? *std::move(server) : nullptr;
}

// Waits until the coordinator has a report of at least `pools` pools from `rank`. A worker attaches before it
// first reports, and a quota set in between finds no pool ("rank 0 has no pool ..."): tests that set quotas
// right after attaching wait here first. False after `timeout`.
inline bool WaitForPools(coordinator::CoordinatorClient& client, int rank, std::size_t pools,
                         milliseconds timeout = milliseconds(5000)) {
  return WaitFor(
      [&] {
        auto view = client.GetCluster();
        const auto* w = view.ok() ? FindRank(*view, rank) : nullptr;
        return w != nullptr && w->pools.size() >= pools;
      },
      timeout);
}

// The address a `memcoord coordinator` child printed ("listening on ADDR"); empty when it did not within
// `timeout`.
inline std::string ListeningAddress(Child& coordinator, milliseconds timeout = milliseconds(10000)) {
  std::string address;
  WaitFor(
      [&] {
        std::smatch m;
        const std::string out = coordinator.output();
        if (!std::regex_search(out, m, std::regex(R"(listening on ([0-9.]+:\d+))"))) return false;
        address = m[1];
        return true;
      },
      timeout);
  return address;
}

}  // namespace memcoord::testing
