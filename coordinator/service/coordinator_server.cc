#include "coordinator/service/coordinator_server.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
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
