#include "coordinator/service/access_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace memcoord::coordinator {
namespace {

constexpr std::string_view kBearer = "Bearer ";

Status PermissionDenied(std::string message) {
  return Status(StatusCode::kPermissionDenied, std::move(message));
}

std::string WorkerRpcList() {
  std::string out;
  for (const RpcAccess& row : kAccessTable) {
    if (row.needs != Credential::kWorker) continue;
    out += fmt::format("{}{}", out.empty() ? "" : ", ", row.rpc);
  }
  return out;
}

// What a caller of `rpc` must present, for UNAUTHENTICATED messages.
std::string Expected(const AccessTokens& tokens, Credential needs) {
  const std::string admin =
      "the admin token (the coordinator's --admin-token-file; CLI: --admin-token-file or "
      "MEMCOORD_ADMIN_TOKEN_FILE)";
  if (needs == Credential::kAdmin || tokens.worker.empty()) return admin;
  return "the worker token (the coordinator's --token-file; workers: MEMCOORD_TOKEN_FILE; CLI: --token-file) "
         "or " +
         admin;
}

}  // namespace

Credential RequiredCredential(std::string_view rpc) {
  for (const RpcAccess& row : kAccessTable) {
    if (row.rpc == rpc) return row.needs;
  }
  return Credential::kAdmin;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // volatile: the compiler may not turn the loop into an early-exit memcmp.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::optional<Credential> PresentedCredential(const AccessTokens& tokens, std::string_view presented) {
  const bool is_admin = !tokens.admin.empty() && ConstantTimeEquals(presented, tokens.admin);
  const bool is_worker = !tokens.worker.empty() && ConstantTimeEquals(presented, tokens.worker);
  if (is_admin) return Credential::kAdmin;
  if (is_worker) return Credential::kWorker;
  return std::nullopt;
}

Status CheckAccessTokens(const AccessTokens& tokens) {
  if (!tokens.worker.empty() && ConstantTimeEquals(tokens.worker, tokens.admin)) {
    return InvalidArgument(
        "the worker token (--token-file) and the admin token (--admin-token-file) are the same; they must "
        "differ, or a worker could trim and set quotas");
  }
  return Status::Ok();
}

Status Authorize(const AccessTokens& tokens, const std::string_view* authorization, std::string_view rpc) {
  if (tokens.open()) return Status::Ok();
  const Credential needs = RequiredCredential(rpc);
  if (authorization == nullptr) {
    return Unauthenticated(fmt::format("{}: no credentials: send 'authorization: Bearer <token>' with {}",
                                       rpc, Expected(tokens, needs)));
  }
  if (authorization->substr(0, kBearer.size()) != kBearer) {
    return Unauthenticated(
        fmt::format("{}: the 'authorization' metadata must be 'Bearer <token>'; expected {}", rpc,
                    Expected(tokens, needs)));
  }
  const std::optional<Credential> presented =
      PresentedCredential(tokens, authorization->substr(kBearer.size()));
  if (presented == Credential::kAdmin) return Status::Ok();
  if (!presented) {
    return Unauthenticated(fmt::format("{}: wrong token; expected {}", rpc, Expected(tokens, needs)));
  }
  if (needs == Credential::kWorker) return Status::Ok();
  if (tokens.admin.empty()) {
    return PermissionDenied(fmt::format(
        "{} needs the admin token, and this coordinator was started without --admin-token-file, so no "
        "caller may use it; the worker token may only call {}",
        rpc, WorkerRpcList()));
  }
  return PermissionDenied(fmt::format(
      "{} needs the admin token (CLI: --admin-token-file or MEMCOORD_ADMIN_TOKEN_FILE); the worker "
      "token may only call {}",
      rpc, WorkerRpcList()));
}

}  // namespace memcoord::coordinator
