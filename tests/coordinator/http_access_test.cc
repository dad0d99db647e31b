// Who may read the HTTP side, live over loopback: with a worker or admin token configured, every endpoint
// that serves cluster data answers only a caller presenting one ("Authorization: Bearer", the scheme in any
// case) and gives anyone else a 401 with "WWW-Authenticate: Bearer" and no data; the dashboard page and
// /healthz stay open; without a token everything stays open, as before.
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "coordinator/service/coordinator_server.h"
#include "coordinator_fixtures.h"
#include "gtest/gtest.h"
#include "http_test_client.h"

namespace memcoord::coordinator {
namespace {

using memcoord::testing::kClusterMarker;
using memcoord::testing::RawExchange;
using memcoord::testing::StartSecretHttp;

const std::vector<std::string> kDataPaths = {"/metrics", "/api/cluster", "/api/timeline", "/api/events",
                                             "/api/session"};

// GET `path` with `authorization` as the Authorization header ("": none).
httplib::Result GetWith(int port, const std::string& path, const std::string& authorization) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  httplib::Headers headers;
  if (!authorization.empty()) headers.emplace("Authorization", authorization);
  return client.Get(path.c_str(), headers);
}

// A 401 as the contract says: the bearer challenge, a JSON error naming `wanted`, and no cluster data.
void ExpectRefused(const httplib::Result& res, const std::string& what, const std::string& wanted) {
  ASSERT_TRUE(res) << what;
  EXPECT_EQ(res->status, 401) << what;
  EXPECT_EQ(res->get_header_value("WWW-Authenticate").rfind("Bearer realm=\"memcoord\"", 0), 0u) << what;
  EXPECT_EQ(res->body.find(kClusterMarker), std::string::npos) << what << ": " << res->body;
  const auto body = nlohmann::json::parse(res->body, nullptr, false);
  ASSERT_TRUE(body.is_object()) << what << ": " << res->body;
  EXPECT_NE(body.value("error", "").find("Authorization: Bearer <token>"), std::string::npos) << res->body;
  EXPECT_NE(body.value("error", "").find(wanted), std::string::npos) << what << ": " << res->body;
}

TEST(HttpAccess, WithATokenEveryDataEndpointAnswersOnlyTheWorkerOrAdminToken) {
  HttpServerOptions options;
  options.token = "reader-secret";
  options.admin_token = "admin-secret";
  auto server = StartSecretHttp(options);
  ASSERT_TRUE(server);
  const std::vector<std::string> refused = {"",
                                            "Bearer wrong",
                                            "Bearer READER-SECRET",  // the token's case matters
                                            "Bearer reader-secret-and-more",
                                            "Bearer ",
                                            "Basic reader-secret",
                                            "reader-secret"};
  for (const std::string& path : kDataPaths) {
    for (const std::string& authorization : refused) {
      ExpectRefused(GetWith(server->port(), path, authorization), path + " with '" + authorization + "'",
                    "--token-file");
    }
    for (const char* authorization :
         {"Bearer reader-secret", "bearer reader-secret", "BEARER admin-secret"}) {
      auto res = GetWith(server->port(), path, authorization);
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 200) << path << " with " << authorization << ": " << res->body;
    }
  }
  // An invalid token is told apart from none (RFC 6750 3.1).
  EXPECT_EQ(GetWith(server->port(), "/metrics", "Bearer wrong")->get_header_value("WWW-Authenticate"),
            R"(Bearer realm="memcoord", error="invalid_token")");
  EXPECT_EQ(GetWith(server->port(), "/metrics", "")->get_header_value("WWW-Authenticate"),
            R"(Bearer realm="memcoord")");
  // What the right token gets is the cluster's data; the worker token is not the admin's.
  EXPECT_NE(GetWith(server->port(), "/metrics", "Bearer reader-secret")->body.find("host=\"host-b7e1\""),
            std::string::npos);
  EXPECT_NE(GetWith(server->port(), "/api/cluster", "Bearer reader-secret")->body.find("pool-b7e1"),
            std::string::npos);
  EXPECT_EQ(
      nlohmann::json::parse(GetWith(server->port(), "/api/session", "Bearer reader-secret")->body)["admin"],
      false);
  EXPECT_EQ(
      nlohmann::json::parse(GetWith(server->port(), "/api/session", "Bearer admin-secret")->body)["admin"],
      true);
  // HEAD is routed as GET: it is refused too.
  const std::string head =
      RawExchange(server->port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 401", 0), 0u) << head;
}

TEST(HttpAccess, TheDashboardPageAndHealthzStayOpenAndHoldNoClusterData) {
  HttpServerOptions options;
  options.token = "reader-secret";
  auto server = StartSecretHttp(options);
  ASSERT_TRUE(server);
  auto health = GetWith(server->port(), "/healthz", "");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(health->body, "ok\n");
  auto page = GetWith(server->port(), "/", "");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body.find(kClusterMarker), std::string::npos);
  // The page reads its token from the URL fragment and sends it with every fetch.
  EXPECT_NE(page->body.find("hash.get(\"token\")"), std::string::npos);
  EXPECT_NE(page->body.find("Authorization: \"Bearer \" + token"), std::string::npos);
  // Paths and methods that serve nothing answer as before, with no data.
  const std::string wrong_method =
      RawExchange(server->port(), "DELETE /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(wrong_method.rfind("HTTP/1.1 405", 0), 0u) << wrong_method;
  EXPECT_EQ(GetWith(server->port(), "/nope", "")->status, 404);
}

TEST(HttpAccess, WithOnlyTheAdminTokenReadsNeedTheAdminToken) {
  HttpServerOptions options;
  options.admin_token = "admin-secret";
  auto server = StartSecretHttp(options);
  ASSERT_TRUE(server);
  for (const std::string& path : kDataPaths) {
    ExpectRefused(GetWith(server->port(), path, ""), path, "admin token (--admin-token-file)");
    ExpectRefused(GetWith(server->port(), path, "Bearer reader-secret"), path, "--admin-token-file");
    EXPECT_EQ(GetWith(server->port(), path, "Bearer admin-secret")->status, 200) << path;
  }
  httplib::Client client("127.0.0.1", server->port());
  auto trim = client.Post("/api/trim", "{}", "application/json");
  ASSERT_TRUE(trim);
  EXPECT_EQ(trim->status, 401);
  EXPECT_EQ(trim->get_header_value("WWW-Authenticate"), R"(Bearer realm="memcoord")");
  trim = client.Post("/api/trim", {{"Authorization", "Bearer admin-secret"}}, "{}", "application/json");
  ASSERT_TRUE(trim);
  EXPECT_EQ(trim->status, 200) << trim->body;
}

TEST(HttpAccess, WithoutATokenEveryReadStaysOpenAsBefore) {
  auto server = StartSecretHttp(HttpServerOptions{});
  ASSERT_TRUE(server);
  for (const std::string& path : kDataPaths) {
    for (const char* authorization : {"", "Bearer anything", "Basic xyz"}) {
      auto res = GetWith(server->port(), path, authorization);
      ASSERT_TRUE(res);
      EXPECT_EQ(res->status, 200) << path << " with '" << authorization << "'";
    }
  }
  EXPECT_NE(GetWith(server->port(), "/metrics", "")->body.find("host=\"host-b7e1\""), std::string::npos);
  httplib::Client client("127.0.0.1", server->port());
  auto trim = client.Post("/api/trim", "{}", "application/json");
  ASSERT_TRUE(trim);
  EXPECT_EQ(trim->status, 403);  // no admin token: no admin actions over HTTP
}

// The coordinator passes its worker token (--token-file) to its HTTP side.
TEST(HttpAccess, TheCoordinatorsWorkerTokenGuardsItsHttpSide) {
  CoordinatorOptions options;
  options.metrics_listen = "127.0.0.1:0";
  options.token = "worker-secret";
  auto server = memcoord::testing::StartServer(options);
  ASSERT_TRUE(server);
  auto refused = GetWith(server->metrics_port(), "/metrics", "");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(refused->body.find("memcoord_"), std::string::npos) << refused->body;
  auto scraped = GetWith(server->metrics_port(), "/metrics", "Bearer worker-secret");
  ASSERT_TRUE(scraped);
  EXPECT_EQ(scraped->status, 200);
  EXPECT_NE(scraped->body.find("# TYPE memcoord_"), std::string::npos);
  EXPECT_EQ(GetWith(server->metrics_port(), "/healthz", "")->status, 200);
}

}  // namespace
}  // namespace memcoord::coordinator
