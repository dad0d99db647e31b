// The worker's session over TLS and mutual TLS, end to end: real certificates (openssl), a gRPC server
// with SSL server credentials that answers Attach with Registered (a stand-in for the coordinator, whose
// own TLS is tested with it), and the credentials built from MEMCOORD_TLS_* exactly as a worker does.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "memcoord/v1/coordinator.grpc.pb.h"
#include "tests/coordinator/test_support.h"
#include "worker/detail/coordinator_session.h"
#include "worker/detail/worker_credentials.h"

namespace memcoord::detail {
namespace {

using memcoord::testing::WaitFor;
using std::chrono::milliseconds;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Registers every session and then reads until the client leaves.
class RegisteringService final : public v1::Coordinator::Service {
  grpc::Status Attach(grpc::ServerContext*,
                      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::WorkerMessage>* stream) override {
    v1::WorkerMessage in;
    if (!stream->Read(&in) || !in.has_register_())
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "");
    v1::CoordinatorMessage reply;
    reply.mutable_registered()->set_coordinator_id("tls-test");
    stream->Write(reply);
    while (stream->Read(&in)) {
    }
    return grpc::Status::OK;
  }
};

class NullHost final : public SessionHost {
 public:
  ReportSample sample() override { return {}; }
  void deliver(const WorkerCommand&) override {}
};

class TlsSession : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir_template[] = "/tmp/memcoord-tls-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    const std::string script =
        "cd " + dir_ +
        " && openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=test-ca"
        " && openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=coordinator"
        " -addext subjectAltName=IP:127.0.0.1"
        " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days "
        "1"
        " -copy_extensions copyall"
        " && openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=worker"
        " && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days "
        "1";
    have_openssl_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  }
  static void TearDownTestSuite() { (void)std::system(("rm -rf " + dir_).c_str()); }

  void SetUp() override {
    if (!have_openssl_) GTEST_SKIP() << "openssl (3.x) is needed to make the test certificates";
    grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    options.pem_root_certs = Slurp(dir_ + "/ca.pem");
    options.pem_key_cert_pairs.push_back({Slurp(dir_ + "/server.key"), Slurp(dir_ + "/server.pem")});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(options), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_TRUE(server_ != nullptr && port_ > 0);
  }
  void TearDown() override {
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + milliseconds(500));
  }

  SessionConfig config(const WorkerCredentials& credentials) const {
    SessionConfig c;
    c.address = "127.0.0.1:" + std::to_string(port_);
    c.credentials = credentials;
    c.report_interval = milliseconds(50);
    return c;
  }

  static inline std::string dir_;
  static inline bool have_openssl_ = false;
  RegisteringService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(TlsSession, MutualTlsFromTheEnvironmentAttaches) {
  auto credentials =
      ResolveWorkerCredentials("", {dir_ + "/ca.pem", dir_ + "/client.pem", dir_ + "/client.key"});
  ASSERT_TRUE(credentials.ok()) << credentials.status().ToString();
  NullHost host;
  CoordinatorSession session(config(*credentials), host);
  session.start();
  ASSERT_TRUE(WaitFor([&] { return session.attached(); }, milliseconds(10000)));
  EXPECT_EQ(session.coordinator_id(), "tls-test");
}

TEST_F(TlsSession, WithoutAClientCertificateOrWithoutTlsTheServerRefuses) {
  auto server_only = ResolveWorkerCredentials("", {dir_ + "/ca.pem", "", ""});
  ASSERT_TRUE(server_only.ok()) << server_only.status().ToString();
  NullHost host;
  CoordinatorSession no_cert(config(*server_only), host);
  CoordinatorSession plaintext(config(WorkerCredentials{}), host);
  no_cert.start();
  plaintext.start();
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(no_cert.registrations(), 0u);
  EXPECT_EQ(plaintext.registrations(), 0u);
}

}  // namespace
}  // namespace memcoord::detail
