// Worker credentials from the environment: token, TLS CA, client certificate and key. Real certificates
// are made with the openssl command (a CA, a client certificate it signs, and a stray key).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "worker/detail/worker_credentials.h"
#include "worker/worker.h"

namespace memcoord::detail {
namespace {

class Credentials : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char dir_template[] = "/tmp/memcoord-creds-XXXXXX";
    dir_ = ::mkdtemp(dir_template);
    const std::string d = dir_;
    const std::string script =
        "cd " + d + " && " +
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 1 -subj /CN=memcoord-ca "
        "&& "
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=worker && "
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 1 "
        "&& "
        "openssl genrsa -out stray.key 2048 && echo 'not a certificate' > junk.txt";
    have_openssl_ = std::system(("(" + script + ") >/dev/null 2>&1").c_str()) == 0;
  }
  static void TearDownTestSuite() { (void)std::system(("rm -rf " + dir_).c_str()); }
  void SetUp() override {
    if (!have_openssl_) GTEST_SKIP() << "the openssl command is not available to make test certificates";
    for (const char* v : {"MEMCOORD_TOKEN", "MEMCOORD_TOKEN_FILE", "MEMCOORD_TLS_CA", "MEMCOORD_TLS_CERT",
                          "MEMCOORD_TLS_KEY"}) {
      ::unsetenv(v);
    }
  }
  static std::string Path(const std::string& name) { return dir_ + "/" + name; }
  static std::string Resolve() {
    auto r = ResolveWorkerCredentials("", {});
    return r.ok() ? "ok" : r.status().ToString();
  }

  static inline std::string dir_;
  static inline bool have_openssl_ = false;
};

TEST_F(Credentials, NothingSetIsAnInsecureChannelWithoutAToken) {
  auto r = ResolveWorkerCredentials("", {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->tls());
  EXPECT_TRUE(r->token.empty());
}

TEST_F(Credentials, TokenFromTheOptionTheVariableOrTheFile) {
  std::ofstream(Path("token")) << "s3cret \n";
  ::setenv("MEMCOORD_TOKEN_FILE", Path("token").c_str(), 1);
  EXPECT_EQ(ResolveWorkerCredentials("", {})->token, "s3cret");
  ::setenv("MEMCOORD_TOKEN", "from-env", 1);
  EXPECT_EQ(ResolveWorkerCredentials("", {})->token, "from-env");
  EXPECT_EQ(ResolveWorkerCredentials("from-option", {})->token, "from-option");
  ::unsetenv("MEMCOORD_TOKEN");
  ::setenv("MEMCOORD_TOKEN_FILE", Path("missing").c_str(), 1);
  const std::string error = Resolve();
  EXPECT_NE(error.find("MEMCOORD_TOKEN_FILE='" + Path("missing") + "' cannot be read"), std::string::npos)
      << error;
}

// A token byte gRPC refuses in metadata aborted the worker at its first call ("Illegal header value").
TEST_F(Credentials, ATokenGrpcWouldRefuseFailsResolutionNamingWhereItCameFrom) {
  std::ofstream(Path("badtoken"), std::ios::binary) << "tok\xff\n";
  ::setenv("MEMCOORD_TOKEN_FILE", Path("badtoken").c_str(), 1);
  std::string error = Resolve();
  EXPECT_NE(
      error.find("MEMCOORD_TOKEN_FILE='" + Path("badtoken") + "': the token holds byte 0xff at position 3"),
      std::string::npos)
      << error;
  ::setenv("MEMCOORD_TOKEN", "bad\x01", 1);
  error = Resolve();
  EXPECT_NE(error.find("MEMCOORD_TOKEN: the token holds byte 0x01"), std::string::npos) << error;
  auto option = ResolveWorkerCredentials(std::string(5000, 't'), {});
  ASSERT_FALSE(option.ok());
  EXPECT_NE(option.status().message().find("WorkerOptions::token: the token is 5000 bytes long"),
            std::string::npos);
}

TEST_F(Credentials, ServerAuthenticatedAndMutualTls) {
  ::setenv("MEMCOORD_TLS_CA", Path("ca.pem").c_str(), 1);
  auto server_only = ResolveWorkerCredentials("", {});
  ASSERT_TRUE(server_only.ok()) << server_only.status().ToString();
  EXPECT_TRUE(server_only->tls());
  EXPECT_TRUE(server_only->cert_pem.empty());
  ::setenv("MEMCOORD_TLS_CERT", Path("client.pem").c_str(), 1);
  ::setenv("MEMCOORD_TLS_KEY", Path("client.key").c_str(), 1);
  auto mutual = ResolveWorkerCredentials("", {});
  ASSERT_TRUE(mutual.ok()) << mutual.status().ToString();
  EXPECT_NE(mutual->cert_pem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(mutual->key_pem.find("PRIVATE KEY"), std::string::npos);
  // Paths in the options take the place of the variables.
  auto from_options = ResolveWorkerCredentials("", {Path("ca.pem"), Path("client.pem"), Path("client.key")});
  ASSERT_TRUE(from_options.ok()) << from_options.status().ToString();
}

TEST_F(Credentials, EachBadSetUpNamesTheVariableAndThePath) {
  ::setenv("MEMCOORD_TLS_CA", Path("nowhere.pem").c_str(), 1);
  EXPECT_NE(Resolve().find("MEMCOORD_TLS_CA='" + Path("nowhere.pem") + "' cannot be read"), std::string::npos)
      << Resolve();
  ::setenv("MEMCOORD_TLS_CA", Path("junk.txt").c_str(), 1);
  EXPECT_NE(Resolve().find("MEMCOORD_TLS_CA='" + Path("junk.txt") + "' is not a PEM file"), std::string::npos)
      << Resolve();
  ::setenv("MEMCOORD_TLS_CA", Path("ca.pem").c_str(), 1);
  ::setenv("MEMCOORD_TLS_CERT", Path("client.pem").c_str(), 1);
  EXPECT_NE(
      Resolve().find("MEMCOORD_TLS_CERT='" + Path("client.pem") + "' is set but MEMCOORD_TLS_KEY is not"),
      std::string::npos)
      << Resolve();
  ::setenv("MEMCOORD_TLS_KEY", Path("stray.key").c_str(), 1);
  EXPECT_NE(
      Resolve().find("MEMCOORD_TLS_KEY='" + Path("stray.key") +
                     "' is not the key of the certificate in MEMCOORD_TLS_CERT='" + Path("client.pem") + "'"),
      std::string::npos)
      << Resolve();
  ::setenv("MEMCOORD_TLS_KEY", Path("ca.pem").c_str(), 1);  // a certificate where the key should be
  EXPECT_NE(Resolve().find("MEMCOORD_TLS_KEY='" + Path("ca.pem") + "' holds no readable"), std::string::npos)
      << Resolve();
  ::unsetenv("MEMCOORD_TLS_CA");
  ::setenv("MEMCOORD_TLS_KEY", Path("client.key").c_str(), 1);
  EXPECT_NE(Resolve().find("but MEMCOORD_TLS_CA is not"), std::string::npos) << Resolve();
}

TEST_F(Credentials, WorkerInitFailsOnABadSetUpInsteadOfRetryingHandshakesForever) {
  ::setenv("MEMCOORD_TLS_CA", Path("junk.txt").c_str(), 1);
  WorkerOptions options;
  options.coordinator = "127.0.0.1:1";
  options.backend = "host";
  options.topology = Topology{0, 0, 1, "test"};
  auto worker = Worker::init(options);
  ASSERT_FALSE(worker.ok());
  EXPECT_EQ(worker.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(worker.status().message().find("MEMCOORD_TLS_CA"), std::string::npos)
      << worker.status().ToString();
  options.coordinator.clear();  // standalone: no session, nothing to authenticate
  EXPECT_TRUE(Worker::init(options).ok());
}

}  // namespace
}  // namespace memcoord::detail
