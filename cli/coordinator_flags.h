// Flags shared by the subcommands that talk to a coordinator (status, trim, quota): --coordinator ADDR
// (default $MEMCOORD_COORDINATOR) and --token-file F (default $MEMCOORD_TOKEN_FILE).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "common/result.h"

#ifdef MEMCOORD_HAVE_COORDINATOR
#include "coordinator/service/coordinator_client.h"
#endif

namespace memcoord::cli {

struct CoordinatorFlags {
  std::string address;
  std::string token_file;

  void add_to(CLI::App* app) {
    if (const char* env = std::getenv("MEMCOORD_COORDINATOR")) address = env;
    if (const char* env = std::getenv("MEMCOORD_TOKEN_FILE")) token_file = env;
    app->add_option("--coordinator", address, "coordinator address HOST:PORT ($MEMCOORD_COORDINATOR)");
    app->add_option("--token-file", token_file, "file holding the bearer token ($MEMCOORD_TOKEN_FILE)");
  }

#ifdef MEMCOORD_HAVE_COORDINATOR
  // INVALID_ARGUMENT without an address; the token file's errors otherwise.
  Result<coordinator::ClientOptions> client_options() const {
    if (address.empty()) {
      return InvalidArgument("no coordinator: pass --coordinator HOST:PORT or set MEMCOORD_COORDINATOR");
    }
    coordinator::ClientOptions options;
    options.address = address;
    if (!token_file.empty()) {
      MEMCOORD_ASSIGN_OR_RETURN(options.token, coordinator::ReadTokenFile(token_file));
    }
    return options;
  }
#endif
};

// Exit code for a failed operation: 2 for bad usage (the request itself is wrong), 1 otherwise.
inline int ExitCodeFor(const Status& status) { return status.code() == StatusCode::kInvalidArgument ? 2 : 1; }

}  // namespace memcoord::cli
