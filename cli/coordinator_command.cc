// memcoord coordinator --listen 127.0.0.1:PORT [--token-file F] [--metrics-listen ADDR] [--dead-after 3s]
// Runs the gRPC coordinator until SIGINT or SIGTERM. Prints one line with the bound address (useful with
// port 0) once it serves.
#include <signal.h>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#ifdef MEMCOORD_HAVE_COORDINATOR
#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#endif

namespace memcoord::cli {

Subcommand AddCoordinatorCommand(CLI::App& root) {
  struct Args {
    std::string listen;
    std::string token_file;
    std::string metrics_listen;
    std::string tls_cert;
    std::string tls_key;
    std::string dead_after = "3s";
  };
  auto args = std::make_shared<Args>();
  CLI::App* app = root.add_subcommand("coordinator", "run the gRPC coordinator");
  app->add_option("--listen", args->listen, "address to serve on, HOST:PORT (port 0: any free port)")
      ->required();
  app->add_option("--token-file", args->token_file, "require 'authorization: Bearer <token>' from clients");
  app->add_option("--metrics-listen", args->metrics_listen,
                  "serve Prometheus metrics over HTTP on HOST:PORT");
  app->add_option("--tls-cert", args->tls_cert, "TLS certificate (not supported yet)");
  app->add_option("--dead-after", args->dead_after,
                  "a worker silent this long is dead and its group aborted (3s, 500ms, 2m; default 3s); "
                  "after 3 missed reports it is only suspect");
  app->add_option("--tls-key", args->tls_key, "TLS key (not supported yet)");
  return {app, [args]() -> int {
#ifdef MEMCOORD_HAVE_COORDINATOR
            if (!args->tls_cert.empty() || !args->tls_key.empty()) {
              std::fprintf(stderr,
                           "memcoord coordinator: TLS is not supported yet; use loopback or a tunnel\n");
              return 2;
            }
            coordinator::CoordinatorOptions options;
            options.listen = args->listen;
            options.metrics_listen = args->metrics_listen;
            Result<std::chrono::milliseconds> dead_after = coordinator::ParseDeadAfter(args->dead_after);
            if (!dead_after.ok()) {
              std::fprintf(stderr, "memcoord coordinator: %s\n", dead_after.status().ToString().c_str());
              return 2;
            }
            options.dead_after = *dead_after;
            if (!args->token_file.empty()) {
              Result<std::string> token = coordinator::ReadTokenFile(args->token_file);
              if (!token.ok()) {
                std::fprintf(stderr, "memcoord coordinator: %s\n", token.status().ToString().c_str());
                return 2;
              }
              options.token = *token;
            }
            // Signals are taken by sigwait on this thread, so block them before any server thread starts.
            sigset_t signals;
            sigemptyset(&signals);
            sigaddset(&signals, SIGINT);
            sigaddset(&signals, SIGTERM);
            pthread_sigmask(SIG_BLOCK, &signals, nullptr);
            auto server = coordinator::CoordinatorServer::Start(options);
            if (!server.ok()) {
              std::fprintf(stderr, "memcoord coordinator: %s\n", server.status().ToString().c_str());
              return ExitCodeFor(server.status());
            }
            std::printf("memcoord coordinator listening on %s", (*server)->address().c_str());
            if ((*server)->metrics_port() > 0)
              std::printf(" (metrics on port %d)", (*server)->metrics_port());
            std::printf("\n");
            std::fflush(stdout);
            int received = 0;
            sigwait(&signals, &received);
            std::fprintf(stderr, "memcoord coordinator: signal %d, shutting down\n", received);
            (*server)->Shutdown();
            return 0;
#else
            std::fprintf(stderr, "memcoord coordinator: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
