// memcoord coordinator --listen HOST:PORT [--token-file F] [--admin-token-file F] [--insecure]
//                      [--tls-cert F --tls-key F [--tls-client-ca F]] [--http-listen|--metrics-listen
//                      [HOST:]PORT]
//                      [--dead-after 3s] [--max-message-size 4MiB] [--max-sessions 4096]
//                      [--max-watches 64] [--max-report-rate 2000]
// Runs the gRPC coordinator until SIGINT or SIGTERM. Prints one line with the bound address (useful with
// port 0) once it serves. Beyond loopback it needs a token (or --insecure, which warns loudly); which RPC
// needs which token: coordinator/service/access_policy.h. Bad flags exit 2 naming the flag.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "cli/coordinator_flags.h"
#include "common/bytes.h"
#ifdef MEMCOORD_HAVE_COORDINATOR
#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/coordinator_server.h"
#include "coordinator/service/listen_policy.h"
#endif

namespace memcoord::cli {
namespace {

struct CoordinatorArgs {
  std::string listen;
  std::string token_file;
  std::string admin_token_file;
  bool insecure = false;
  std::string metrics_listen;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  std::string dead_after = "3s";
  std::string max_message_size = "4MiB";
  std::size_t max_sessions = 4096;
  std::size_t max_watches = 64;
  double max_report_rate = 2000;
};

void AddFlags(CLI::App* app, CoordinatorArgs& args) {
  app->add_option("--listen", args.listen, "address to serve on, HOST:PORT (port 0: any free port)")
      ->required();
  app->add_option("--token-file", args.token_file,
                  "the worker token: workers and status readers send 'authorization: Bearer <token>'");
  app->add_option("--admin-token-file", args.admin_token_file,
                  "the admin token: needed by trim, quota and plan (it passes every RPC)");
  app->add_flag("--insecure", args.insecure,
                "serve beyond loopback without a token (anyone who reaches it is admin; warns loudly)");
  app->add_option("--tls-cert", args.tls_cert, "TLS: the server certificate (chain), PEM");
  app->add_option("--tls-key", args.tls_key, "TLS: the private key of --tls-cert, PEM");
  app->add_option("--tls-client-ca", args.tls_client_ca,
                  "mutual TLS: require client certificates signed by this CA (PEM)");
  app->add_option(
      "--http-listen,--metrics-listen", args.metrics_listen,
      "serve HTTP on [HOST:]PORT (loopback unless a host is named; memcoord's port: 9401): /metrics "
      "(Prometheus), the dashboard (/) and its JSON API (/api/...); with a token configured, /metrics and "
      "/api/... need it as 'Authorization: Bearer' (admin actions the admin token)");
  app->add_option("--dead-after", args.dead_after,
                  "a worker silent this long is dead and its group aborted (3s, 500ms, 2m; default 3s); "
                  "after 3 missed reports it is only suspect");
  app->add_option("--max-message-size", args.max_message_size,
                  "largest request accepted (default 4MiB); larger ones get RESOURCE_EXHAUSTED");
  app->add_option("--max-sessions", args.max_sessions, "open worker sessions at most (default 4096)");
  app->add_option("--max-watches", args.max_watches,
                  "open Watch streams (status --watch) at most (default 64); each holds a server thread");
  app->add_option("--max-report-rate", args.max_report_rate,
                  "reports per second one worker session may send, sustained (default 2000; 0: no limit); "
                  "beyond it the session is cut off (a worker reports at every step end)");
}

#ifdef MEMCOORD_HAVE_COORDINATOR
Status ReadTokens(const CoordinatorArgs& args, coordinator::CoordinatorOptions& options) {
  if (!args.token_file.empty()) {
    MEMCOORD_ASSIGN_OR_RETURN(options.token, coordinator::ReadTokenFile(args.token_file));
  }
  if (!args.admin_token_file.empty()) {
    MEMCOORD_ASSIGN_OR_RETURN(options.admin_token, coordinator::ReadTokenFile(args.admin_token_file));
  }
  return Status::Ok();
}

// The flags as options; INVALID_ARGUMENT naming the flag that is wrong.
Result<coordinator::CoordinatorOptions> ToOptions(const CoordinatorArgs& args) {
  coordinator::CoordinatorOptions options;
  options.listen = args.listen;
  options.metrics_listen = args.metrics_listen;
  options.insecure = args.insecure;
  options.tls = {args.tls_cert, args.tls_key, args.tls_client_ca};
  MEMCOORD_ASSIGN_OR_RETURN(options.dead_after, coordinator::ParseDeadAfter(args.dead_after));
  Result<std::uint64_t> message_bytes = ParseBytes(args.max_message_size);
  if (!message_bytes.ok()) return message_bytes.status().WithContext("--max-message-size: ");
  options.limits.max_message_bytes = *message_bytes;
  options.limits.max_sessions = args.max_sessions;
  options.limits.max_watches = args.max_watches;
  options.limits.max_reports_per_second = args.max_report_rate;
  MEMCOORD_RETURN_IF_ERROR(ReadTokens(args, options));
  return options;
}

// A server holds a descriptor per client: the soft limit (often 1,024) goes up to the hard one, so that many
// connections on the HTTP side do not leave gRPC unable to accept (it does not resume after EMFILE).
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

int Serve(const CoordinatorArgs& args) {
  RaiseDescriptorLimit();
  Result<coordinator::CoordinatorOptions> options = ToOptions(args);
  if (!options.ok()) {
    std::fprintf(stderr, "memcoord coordinator: %s\n", options.status().ToString().c_str());
    return 2;
  }
  const bool has_token = !options->token.empty() || !options->admin_token.empty();
  const std::string warning = coordinator::InsecureWarning(options->listen, has_token, options->insecure);
  if (!warning.empty()) std::fprintf(stderr, "\nmemcoord coordinator: %s\n\n", warning.c_str());
  // Signals are taken by sigwait on this thread, so block them before any server thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = coordinator::CoordinatorServer::Start(*options);
  if (!server.ok()) {
    std::fprintf(stderr, "memcoord coordinator: %s\n", server.status().ToString().c_str());
    return ExitCodeFor(server.status());
  }
  std::printf("memcoord coordinator listening on %s", (*server)->address().c_str());
  if ((*server)->metrics_port() > 0) {
    std::printf(" (metrics on port %d: /metrics, dashboard /)", (*server)->metrics_port());
  }
  std::printf("\n");
  std::fflush(stdout);
  int received = 0;
  sigwait(&signals, &received);
  std::fprintf(stderr, "memcoord coordinator: signal %d, shutting down\n", received);
  (*server)->Shutdown();
  return 0;
}
#endif

}  // namespace

Subcommand AddCoordinatorCommand(CLI::App& root) {
  auto args = std::make_shared<CoordinatorArgs>();
  CLI::App* app = root.add_subcommand("coordinator", "run the gRPC coordinator");
  AddFlags(app, *args);
  return {app, [args]() -> int {
#ifdef MEMCOORD_HAVE_COORDINATOR
            return Serve(*args);
#else
            std::fprintf(stderr, "memcoord coordinator: this build has no gRPC\n");
            return 1;
#endif
          }};
}

}  // namespace memcoord::cli
