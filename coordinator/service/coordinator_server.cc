#include "coordinator/service/coordinator_server.h"

#include <fmt/format.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <condition_variable>
#include <mutex>

#include "coordinator/service/coordinator_service.h"
#include "coordinator/service/metrics_http.h"

namespace memcoord::coordinator {

class CoordinatorServer::Impl {
 public:
  std::unique_ptr<CoordinatorService> service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<MetricsHttpServer> metrics;
  int port = 0;
  std::string host;

  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false;  // guarded by mu
};

Result<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(const CoordinatorOptions& options) {
  const auto colon = options.listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument(fmt::format("--listen must be HOST:PORT, got '{}'", options.listen));
  }
  auto impl = std::make_unique<Impl>();
  impl->host = options.listen.substr(0, colon);
  impl->service = std::make_unique<CoordinatorService>(options);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &impl->port);
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
    CoordinatorService* service = impl->service.get();
    auto metrics = MetricsHttpServer::Start(options.metrics_listen,
                                            [service] { return RenderPrometheus(service->snapshot()); });
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

std::string CoordinatorServer::address() const { return fmt::format("{}:{}", impl_->host, impl_->port); }

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
