// The access policy (access_policy.h): the constant-time comparison, the RPC/credential table and what
// Authorize answers for every kind of caller.
#include "coordinator/service/access_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace memcoord::coordinator {
namespace {

TEST(ConstantTimeEquals, ComparesLikeEquality) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "S3cret"));   // first byte
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3creT"));   // last byte
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cre"));    // a prefix
  EXPECT_FALSE(ConstantTimeEquals("s3cret", "s3cret!"));  // longer
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("ab\0", 3), "ab"));  // a trailing NUL is not padding
}

// Where the first difference is must not change the time: an early-exit compare of 4 MiB strings is
// ~1000x faster when they differ at byte 0 than at the last byte; this one takes about as long.
TEST(ConstantTimeEquals, TimeDoesNotDependOnWhereTheyDiffer) {
  const std::string secret(4 << 20, 'k');
  std::string first = secret, last = secret;
  first.front() = 'x';
  last.back() = 'x';
  auto median_ns = [&](const std::string& guess) {
    std::vector<double> ns;
    for (int i = 0; i < 9; ++i) {
      const auto start = std::chrono::steady_clock::now();
      EXPECT_FALSE(ConstantTimeEquals(secret, guess));
      ns.push_back(
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ns.begin(), ns.end());
    return ns[ns.size() / 2];
  };
  const double at_first = median_ns(first);
  const double at_last = median_ns(last);
  EXPECT_GT(at_first, at_last / 4) << "differs at byte 0: " << at_first << " ns, at the end: " << at_last;
  EXPECT_LT(at_first, at_last * 4) << "differs at byte 0: " << at_first << " ns, at the end: " << at_last;
}

TEST(AccessTable, WorkerRpcsAndAdminRpcs) {
  for (const char* rpc : {"Attach", "GetCluster", "Watch", "Put", "Get"}) {
    EXPECT_EQ(RequiredCredential(rpc), Credential::kWorker) << rpc;
  }
  for (const char* rpc : {"Trim", "SetQuota", "Plan"}) {
    EXPECT_EQ(RequiredCredential(rpc), Credential::kAdmin) << rpc;
  }
  EXPECT_EQ(RequiredCredential("SomeNewRpc"), Credential::kAdmin);  // closed by default
}

Status Call(const AccessTokens& tokens, const char* header, const char* rpc) {
  if (header == nullptr) return Authorize(tokens, nullptr, rpc);
  const std::string_view value(header);
  return Authorize(tokens, &value, rpc);
}

TEST(Authorize, NoTokenConfiguredIsOpen) {
  EXPECT_TRUE(Call({}, nullptr, "Trim").ok());
  EXPECT_TRUE(Call({}, "Bearer anything", "SetQuota").ok());
}

TEST(Authorize, WorkerAndAdminTokens) {
  const AccessTokens tokens{"w0rker", "adm1n"};
  EXPECT_TRUE(Call(tokens, "Bearer w0rker", "Attach").ok());
  EXPECT_TRUE(Call(tokens, "Bearer w0rker", "Put").ok());
  EXPECT_TRUE(Call(tokens, "Bearer w0rker", "GetCluster").ok());
  EXPECT_TRUE(Call(tokens, "Bearer adm1n", "Attach").ok());
  EXPECT_TRUE(Call(tokens, "Bearer adm1n", "Trim").ok());
  EXPECT_TRUE(Call(tokens, "Bearer adm1n", "Plan").ok());

  const Status worker_trims = Call(tokens, "Bearer w0rker", "Trim");
  EXPECT_EQ(worker_trims.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(worker_trims.message().find("Trim needs the admin token"), std::string::npos)
      << worker_trims.message();
  EXPECT_NE(worker_trims.message().find("--admin-token-file"), std::string::npos);
  EXPECT_EQ(Call(tokens, "Bearer w0rker", "SetQuota").code(), StatusCode::kPermissionDenied);

  const Status none = Call(tokens, nullptr, "GetCluster");
  EXPECT_EQ(none.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(none.message().find("the worker token"), std::string::npos) << none.message();
  const Status wrong = Call(tokens, "Bearer guess", "Trim");
  EXPECT_EQ(wrong.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(wrong.message().find("expected the admin token"), std::string::npos) << wrong.message();
  EXPECT_EQ(Call(tokens, "w0rker", "Get").code(), StatusCode::kUnauthenticated);  // no "Bearer "
  EXPECT_EQ(Call(tokens, "Bearer ", "Get").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Call(tokens, "Bearer w0rker ", "Get").code(), StatusCode::kUnauthenticated);
}

TEST(Authorize, OnlyAWorkerTokenRefusesAdminRpcsToEveryone) {
  const AccessTokens tokens{"w0rker", ""};
  EXPECT_TRUE(Call(tokens, "Bearer w0rker", "Watch").ok());
  const Status trim = Call(tokens, "Bearer w0rker", "Trim");
  EXPECT_EQ(trim.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(trim.message().find("without --admin-token-file"), std::string::npos) << trim.message();
  EXPECT_EQ(Call(tokens, nullptr, "Trim").code(), StatusCode::kUnauthenticated);
}

TEST(Authorize, OnlyAnAdminTokenIsNeededEverywhere) {
  const AccessTokens tokens{"", "adm1n"};
  EXPECT_TRUE(Call(tokens, "Bearer adm1n", "Attach").ok());
  EXPECT_EQ(Call(tokens, nullptr, "Attach").code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(Call(tokens, "Bearer ", "Attach").code(), StatusCode::kUnauthenticated);
}

TEST(Authorize, EqualTokensAreRefusedAtStart) {
  EXPECT_EQ(CheckAccessTokens({"same", "same"}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckAccessTokens({"a", "b"}).ok());
  EXPECT_TRUE(CheckAccessTokens({"", ""}).ok());
  EXPECT_TRUE(CheckAccessTokens({"", "b"}).ok());
}

}  // namespace
}  // namespace memcoord::coordinator
