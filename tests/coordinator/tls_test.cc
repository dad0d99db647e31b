// The coordinator's TLS and mutual TLS from PEM files, with real certificates made by openssl in the test:
// TLS serves the admin client and a worker; a plaintext client is refused; under mutual TLS a client
// without a certificate is refused and one with a certificate of the client CA is served. Bad files fail
// Start() naming the flag.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class CoordinatorTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir_template[] = "/tmp/memcoord-coord-tls-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    // A CA, the coordinator's certificate for 127.0.0.1, and a client certificate; a second CA that
    // signed nothing here, for the "wrong client CA" case.
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
    have_openssl_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  }
  static void TearDownTestSuite() { (void)std::system(("rm -rf " + dir_).c_str()); }
  void SetUp() override {
    if (!have_openssl_) GTEST_SKIP() << "openssl (3.x) is needed to make the test certificates";
  }

  static std::string file(const char* name) { return dir_ + "/" + name; }

  std::unique_ptr<CoordinatorServer> start(bool mutual, const char* client_ca = "ca.pem") {
    CoordinatorOptions options;
    options.tls = {file("server.pem"), file("server.key"), mutual ? file(client_ca) : ""};
    auto server = CoordinatorServer::Start(options);
    EXPECT_TRUE(server.ok()) << server.status().ToString();
    return server.ok() ? *std::move(server) : nullptr;
  }

  static ClientOptions client(const CoordinatorServer& server, bool tls, bool certificate) {
    ClientOptions options;
    options.address = server.address();
    options.timeout = milliseconds(3000);
    if (tls) options.ca_pem = Slurp(file("ca.pem"));
    if (certificate) {
      options.cert_pem = Slurp(file("client.pem"));
      options.key_pem = Slurp(file("client.key"));
    }
    return options;
  }

  static std::unique_ptr<Worker> worker(const CoordinatorServer& server, bool certificate) {
    WorkerOptions options;
    options.coordinator = server.address();
    options.backend = "host";
    options.capacity_bytes = 1ull << 30;
    options.report_interval = milliseconds(50);
    options.topology = Topology{0, 0, 1, "tls"};
    options.tls_ca = file("ca.pem");
    if (certificate) {
      options.tls_cert = file("client.pem");
      options.tls_key = file("client.key");
    }
    auto w = Worker::init(options);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return w.ok() ? *std::move(w) : nullptr;
  }

  static inline std::string dir_;
  static inline bool have_openssl_ = false;
};

TEST_F(CoordinatorTls, TlsServesClientsAndWorkersAndRefusesPlaintext) {
  auto server = start(/*mutual=*/false);
  ASSERT_TRUE(server);
  CoordinatorClient tls(client(*server, true, false));
  auto view = tls.GetCluster();
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  auto w = worker(*server, false);
  ASSERT_TRUE(w);
  EXPECT_TRUE(WaitFor([&] { return w->attached(); }, milliseconds(10000)));

  CoordinatorClient plaintext(client(*server, false, false));
  auto refused = plaintext.GetCluster();
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().ToString();
}

TEST_F(CoordinatorTls, MutualTlsRequiresAClientCertificateOfTheClientCa) {
  auto server = start(/*mutual=*/true);
  ASSERT_TRUE(server);
  CoordinatorClient with_certificate(client(*server, true, true));
  auto view = with_certificate.GetCluster();
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  auto w = worker(*server, true);
  ASSERT_TRUE(w);
  EXPECT_TRUE(WaitFor([&] { return w->attached(); }, milliseconds(10000)));

  CoordinatorClient no_certificate(client(*server, true, false));
  EXPECT_FALSE(no_certificate.GetCluster().ok());
  CoordinatorClient plaintext(client(*server, false, false));
  EXPECT_FALSE(plaintext.GetCluster().ok());
  auto no_cert_worker = worker(*server, false);
  ASSERT_TRUE(no_cert_worker);
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_FALSE(no_cert_worker->attached());

  // A certificate the client CA did not sign is refused too.
  auto other = start(/*mutual=*/true, "other-ca.pem");
  ASSERT_TRUE(other);
  CoordinatorClient foreign(client(*other, true, true));
  EXPECT_FALSE(foreign.GetCluster().ok());
}

TEST_F(CoordinatorTls, BadFilesFailAtStartNamingTheFlag) {
  CoordinatorOptions options;
  options.tls = {file("missing.pem"), file("server.key"), ""};
  auto missing = CoordinatorServer::Start(options);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--tls-cert"), std::string::npos) << missing.status().ToString();

  options.tls = {file("server.pem"), "", ""};
  auto no_key = CoordinatorServer::Start(options);
  ASSERT_FALSE(no_key.ok());
  EXPECT_NE(no_key.status().message().find("--tls-key"), std::string::npos) << no_key.status().ToString();

  options.tls = {file("server.pem"), file("ca.srl"), ""};
  auto not_pem = CoordinatorServer::Start(options);
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("not a PEM file"), std::string::npos)
      << not_pem.status().ToString();
}

}  // namespace
}  // namespace memcoord::coordinator
