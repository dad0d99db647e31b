// Who may call what on the coordinator. Two bearer tokens (`authorization: Bearer <token>` metadata):
//
//   worker token  (coordinator --token-file; workers: MEMCOORD_TOKEN / MEMCOORD_TOKEN_FILE)
//   admin token   (coordinator --admin-token-file; CLI: --admin-token-file / MEMCOORD_ADMIN_TOKEN_FILE)
//
// The credential each RPC of memcoord.v1.Coordinator needs (kAccessTable below is the one source):
//
//   RPC         needs    why
//   Attach      worker   a worker's own session: Register, Report, Ack, OomRequest (asks quota for itself)
//   GetCluster  worker   reads status
//   Watch       worker   reads status
//   Put         worker   the bootstrap store (write-once keys, e.g. the NCCL unique id)
//   Get         worker   the bootstrap store
//   Trim        admin    releases every rank's cache
//   SetQuota    admin    changes pool quotas and device budgets
//   Plan        admin    runs the planner on the coordinator's CPU (up to 30 s)
//   (Abort is no RPC: the coordinator alone sends it, when a worker of the group dies.)
//   grpc.health.v1.Health  open (no token); gRPC reflection is off.
//
// The admin token passes every RPC. No token configured: every RPC is open (allowed on loopback only,
// or with --insecure; see listen_policy.h). Only the worker token configured: admin RPCs are refused
// (PERMISSION_DENIED). Only the admin token: every RPC needs it.
//
// Errors: a missing, malformed or wrong token is UNAUTHENTICATED naming the token expected; the worker
// token on an admin RPC is PERMISSION_DENIED naming the RPC and that it needs the admin token. Tokens are
// compared in constant time. Plain functions over immutable data: thread-safe. No gRPC type here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace memcoord::coordinator {

enum class Credential { kWorker, kAdmin };

struct RpcAccess {
  std::string_view rpc;  // the method name in memcoord.v1.Coordinator
  Credential needs;
};

inline constexpr RpcAccess kAccessTable[] = {
    {"Attach", Credential::kWorker},  {"GetCluster", Credential::kWorker}, {"Watch", Credential::kWorker},
    {"Put", Credential::kWorker},     {"Get", Credential::kWorker},        {"Trim", Credential::kAdmin},
    {"SetQuota", Credential::kAdmin}, {"Plan", Credential::kAdmin},
};

// The credential `rpc` needs; an RPC missing from the table needs the admin token (closed by default).
Credential RequiredCredential(std::string_view rpc);

// True when a and b are equal. Its running time depends only on the two lengths, never on where the
// first difference is (no early exit), so a caller cannot guess a token byte by byte from response times.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

struct AccessTokens {
  std::string worker;  // empty: no worker token
  std::string admin;   // empty: no admin token
  bool open() const { return worker.empty() && admin.empty(); }
};

// Which configured token `presented` is: kAdmin, kWorker, or nothing (no match, or that token is not set).
// Both comparisons always run, so the time does not say which token was nearly right. Serves Authorize and
// the HTTP side (http_server.cc), which parse the bearer scheme each their own way.
std::optional<Credential> PresentedCredential(const AccessTokens& tokens, std::string_view presented);

// INVALID_ARGUMENT when both are set and equal (the split would mean nothing).
Status CheckAccessTokens(const AccessTokens& tokens);

// Checks a call of `rpc` whose `authorization` metadata is `authorization` (nullptr: none sent).
Status Authorize(const AccessTokens& tokens, const std::string_view* authorization, std::string_view rpc);

}  // namespace memcoord::coordinator
