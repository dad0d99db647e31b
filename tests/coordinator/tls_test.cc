// The coordinator's TLS and mutual TLS from PEM files, with real certificates made by openssl in the test:
// TLS serves the admin client and a worker; a plaintext client is refused; under mutual TLS a client
// without a certificate is refused and one with a certificate of the client CA is served. Bad files fail
// Start() naming the flag.
#include <gtest/gtest.h>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "test_support.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

class CoordinatorTls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { certs_ = std::make_unique<memcoord::testing::TestCertificates>(); }
  static void TearDownTestSuite() { certs_.reset(); }
  void SetUp() override {
    if (!certs_->ok()) GTEST_SKIP() << "openssl (3.x) is needed to make the test certificates";
  }

  static std::string file(const char* name) { return certs_->path(name); }

  std::unique_ptr<CoordinatorServer> start(bool mutual, const char* client_ca = "ca.pem") {
    CoordinatorOptions options;
    options.tls = {file("server.pem"), file("server.key"), mutual ? file(client_ca) : ""};
    return memcoord::testing::StartServer(options);
  }

  static ClientOptions client(const CoordinatorServer& server, bool tls, bool certificate) {
    ClientOptions options;
    options.address = server.address();
    options.timeout = milliseconds(3000);
    if (tls) options.ca_pem = certs_->pem("ca.pem");
    if (certificate) {
      options.cert_pem = certs_->pem("client.pem");
      options.key_pem = certs_->pem("client.key");
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

  static inline std::unique_ptr<memcoord::testing::TestCertificates> certs_;
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
