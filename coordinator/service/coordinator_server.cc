#include "coordinator/service/coordinator_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>

#include "coordinator/http/http_server.h"
#include "coordinator/service/access_policy.h"
#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/listen_policy.h"
#include "coordinator/service/pem_file.h"

namespace memcoord::coordinator {

class CoordinatorServer::Impl {
 public:
  std::unique_ptr<CoordinatorService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<HttpServer> metrics;
  int port = 0;
  std::string host;

  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;  // guarded by mu
};

namespace {

// Insecure credentials without TLS files; SSL from the PEM files otherwise (a client CA: mutual TLS).
Result<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  if (tls.cert.empty() || tls.key.empty()) {
    return InvalidArgument(fmt::format(
        "TLS needs both --tls-cert and --tls-key (got --tls-cert '{}', --tls-key '{}'{})", tls.cert, tls.key,
        tls.client_ca.empty() ? "" : fmt::format(", --tls-client-ca '{}'", tls.client_ca)));
  }
  grpc::SslServerCredentialsOptions options(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  MEMCOORD_ASSIGN_OR_RETURN(pair.cert_chain, ReadPemFile(tls.cert, "--tls-cert", "the server's certificate"));
  MEMCOORD_ASSIGN_OR_RETURN(pair.private_key,
                            ReadPemFile(tls.key, "--tls-key", "the private key of --tls-cert"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!tls.client_ca.empty()) {
    MEMCOORD_ASSIGN_OR_RETURN(
        options.pem_root_certs,
        ReadPemFile(tls.client_ca, "--tls-client-ca", "the CA certificate that signs client certificates"));
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

// The options' own checks, before anything binds: tokens, the loopback rule, limits.
Status CheckOptions(const CoordinatorOptions& options) {
  MEMCOORD_RETURN_IF_ERROR(CheckAccessTokens({options.token, options.admin_token}));
  const bool has_token = !options.token.empty() || !options.admin_token.empty();
  MEMCOORD_RETURN_IF_ERROR(CheckListenPolicy(options.listen, has_token, options.insecure));
  if (options.limits.max_message_bytes < 1024 || options.limits.max_message_bytes > (std::size_t{1} << 30)) {
    return InvalidArgument(fmt::format("--max-message-size must be between 1 KiB and 1 GiB, got {} bytes",
                                       options.limits.max_message_bytes));
  }
  if (options.limits.max_sessions < 1) return InvalidArgument("--max-sessions must be at least 1, got 0");
  if (options.limits.max_watches < 1) return InvalidArgument("--max-watches must be at least 1, got 0");
  if (!(options.limits.max_reports_per_second >= 0)) {
    return InvalidArgument(fmt::format("--max-report-rate must be >= 0 (0: unlimited), got {}",
                                       options.limits.max_reports_per_second));
  }
  return Status::Ok();
}

// The HTTP side over the service: snapshots for reading (with a token configured, only for callers that
// present the worker or admin token); trims (admin token only) through the Trim RPC's handler, with the
// admin token (--admin-token-file); none: the HTTP side is read-only.
Result<std::unique_ptr<HttpServer>> StartHttp(const CoordinatorOptions& options,
                                              CoordinatorService* service) {
  HttpServerOptions http;
  http.listen = NormalizeMetricsListen(options.metrics_listen);
  http.token = options.token;
  http.admin_token = options.admin_token;
  HttpHandlers handlers;
  handlers.snapshot = [service] { return service->snapshot(); };
  handlers.trim = [service](std::uint64_t target_bytes) -> Result<std::string> {
    v1::TrimRequest request;
    request.set_now(true);
    request.set_target_bytes(target_bytes);
    v1::TrimResponse reply;
    MEMCOORD_RETURN_IF_ERROR(service->trim(request, &reply));
    nlohmann::json out = {
        {"complete", reply.complete()},
        {"released_bytes", reply.released_bytes()},
        {"fanout_ms", reply.fanout_ms()},
        {"missing_ranks", std::vector<int>(reply.missing_ranks().begin(), reply.missing_ranks().end())}};
    return out.dump();
  };
  return HttpServer::Start(http, std::move(handlers));
}

// HTTP/2 keepalive, both ways.
// Workers ping every second (their channel's keepalive), with or without a call (their Attach stream may be
// between sessions), to notice a vanished coordinator fast. gRPC's server default calls more than one ping
// per 5 minutes without data abuse and, after 2 such strikes, sends GOAWAY (too_many_pings): that breaks the
// worker's Attach stream, which marks the rank dead and aborts the job. So pings are allowed every 500 ms
// (twice the workers' rate), with or without calls, and never struck (max strikes 0): a false strike must
// never cost a training job, and a flood of pings costs the server no more than a flood of any other frame it
// must read anyway.
// The server pings too, after 2 s in which nothing arrived on a connection, and closes the connection when no
// ack comes within max(2 s, --dead-after). For an Attach session this adds no earlier death: the liveness
// sweep already declares a silent worker dead after --dead-after and cancels its stream, and the timeout is
// never shorter, so a stall the grace period forgives (a stopped process does not answer pings) is never
// turned into an abort here. What it adds: the connection of a vanished host is closed (not held until TCP
// gives up, ~15 min), which frees what no rank accounts for: Attach streams that never registered
// (--max-sessions slots), Watch streams (--max-watches) and waiting Gets of a client that is gone.
void AddKeepalive(grpc::ServerBuilder& builder, std::chrono::milliseconds dead_after) {
  constexpr int kKeepaliveTimeMs = 2000;
  const auto timeout_ms = std::max<std::int64_t>(2000, dead_after.count());
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTimeMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                             static_cast<int>(std::min<std::int64_t>(timeout_ms, 24 * 3600 * 1000)));
}

}  // namespace

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(const CoordinatorOptions& options) {
  MEMCOORD_RETURN_IF_ERROR(CheckOptions(options));
  MEMCOORD_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                            MakeServerCredentials(options.tls));
  const bool has_token = !options.token.empty() || !options.admin_token.empty();
  if (const std::string warning = InsecureWarning(options.listen, has_token, options.insecure);
      !warning.empty()) {
    spdlog::warn("coordinator: {}", warning);
  }
  if (has_token && !options.tls.enabled() && !IsLoopbackHost(SplitHostPort(options.listen, "")->host)) {
    spdlog::warn(
        "coordinator: serving on '{}' without TLS: tokens cross the network in clear text; pass "
        "--tls-cert and --tls-key on an untrusted network",
        options.listen);
  }
  auto impl = std::make_unique<Impl>();
  impl->host = SplitHostPort(options.listen, "--listen")->host;
  impl->service = std::make_unique<CoordinatorService>(options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default, so a second coordinator on a port already served would share it
  // with the first, each taking some of the workers and clients.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AddKeepalive(builder, options.dead_after);
  builder.AddListeningPort(options.listen, credentials, &impl->port);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.limits.max_message_bytes));
  builder.RegisterService(impl->service.get());
  impl->server = builder.BuildAndStart();
  if (!impl->server || impl->port == 0) {
    impl->service->shutdown();
    return Unavailable(fmt::format("cannot listen on '{}' (address in use or not local?)", options.listen));
  }
  if (auto* health = impl->server->GetHealthCheckService()) {
    health->SetServingStatus("memcoord.v1.Coordinator", true);
  }
  if (!options.metrics_listen.empty()) {
    auto metrics = StartHttp(options, impl->service.get());
    if (!metrics.ok()) {
      impl->service->shutdown();
      impl->server->Shutdown(std::chrono::system_clock::now());
      return metrics.status();
    }
    impl->metrics = *std::move(metrics);
  }
  return std::unique_ptr<CoordinatorServer>(new CoordinatorServer(std::move(impl)));
}

CoordinatorServer::CoordinatorServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

int CoordinatorServer::port() const { return impl_->port; }

std::string CoordinatorServer::address() const {
  if (impl_->host.find(':') != std::string::npos) return fmt::format("[{}]:{}", impl_->host, impl_->port);
  return fmt::format("{}:{}", impl_->host, impl_->port);
}

int CoordinatorServer::metrics_port() const { return impl_->metrics ? impl_->metrics->port() : 0; }

ClusterView CoordinatorServer::snapshot() const { return impl_->service->snapshot(); }

void CoordinatorServer::Shutdown() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  if (impl_->metrics) impl_->metrics->Stop();
  impl_->service->shutdown();  // cancels sessions and ends waits first, so Shutdown below is quick
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  impl_->server->Wait();
  impl_->cv.notify_all();
}

void CoordinatorServer::Wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->stopped; });
}

}  // namespace memcoord::coordinator
