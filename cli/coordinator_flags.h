// Flags shared by the subcommands that talk to a coordinator (status, trim, quota, plan --coordinator):
//   --coordinator ADDR        (default $MEMCOORD_COORDINATOR)
//   --token-file F            the worker token (default $MEMCOORD_TOKEN_FILE): enough for status
//   --admin-token-file F      the admin token (default $MEMCOORD_ADMIN_TOKEN_FILE): needed by trim, quota
//                             and plan; sent instead of the worker token when both are given
// and TLS from the environment, as a worker reads it: $MEMCOORD_TLS_CA (PEM of the CA that signed the
// coordinator's certificate) makes the channel TLS; $MEMCOORD_TLS_CERT + $MEMCOORD_TLS_KEY add a client
// certificate (mutual TLS). Which RPC needs which token: coordinator/service/access_policy.h.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>

#include "common/coordinator_address.h"
#include "common/result.h"

#ifdef MEMCOORD_HAVE_COORDINATOR
#include <fmt/format.h>

#include "coordinator/service/coordinator_client.h"
#include "coordinator/service/pem_file.h"
#endif

namespace memcoord::cli {

struct CoordinatorFlags {
  std::string address;
  std::string token_file;
  std::string admin_token_file;

  void add_to(CLI::App* app) {
    if (const char* env = std::getenv("MEMCOORD_COORDINATOR")) address = env;
    read_token_variables();
    app->add_option("--coordinator", address, "coordinator address HOST:PORT ($MEMCOORD_COORDINATOR)");
    add_token_options(app);
  }

  // The token flags alone (plan takes --coordinator without the variable).
  void add_token_options(CLI::App* app) {
    app->add_option("--token-file", token_file, "file holding the worker token ($MEMCOORD_TOKEN_FILE)");
    app->add_option(
        "--admin-token-file", admin_token_file,
        "file holding the admin token, needed by trim, quota and plan ($MEMCOORD_ADMIN_TOKEN_FILE)");
  }
  void read_token_variables() {
    if (const char* env = std::getenv("MEMCOORD_TOKEN_FILE")) token_file = env;
    if (const char* env = std::getenv("MEMCOORD_ADMIN_TOKEN_FILE")) admin_token_file = env;
  }

#ifdef MEMCOORD_HAVE_COORDINATOR
  // INVALID_ARGUMENT without an address, for a bad TLS variable or an unreadable token file.
  Result<coordinator::ClientOptions> client_options() const {
    if (address.empty()) {
      return InvalidArgument("no coordinator: pass --coordinator HOST:PORT or set MEMCOORD_COORDINATOR");
    }
    MEMCOORD_RETURN_IF_ERROR(CheckCoordinatorAddress(address, "--coordinator (or MEMCOORD_COORDINATOR)"));
    coordinator::ClientOptions options;
    options.address = address;
    if (!admin_token_file.empty()) {
      MEMCOORD_ASSIGN_OR_RETURN(options.token, coordinator::ReadTokenFile(admin_token_file));
    } else if (!token_file.empty()) {
      MEMCOORD_ASSIGN_OR_RETURN(options.token, coordinator::ReadTokenFile(token_file));
    }
    MEMCOORD_RETURN_IF_ERROR(read_tls(options));
    return options;
  }

 private:
  static Status read_tls(coordinator::ClientOptions& options) {
    const char* ca = std::getenv("MEMCOORD_TLS_CA");
    const char* cert = std::getenv("MEMCOORD_TLS_CERT");
    const char* key = std::getenv("MEMCOORD_TLS_KEY");
    const bool has_ca = ca != nullptr && *ca != '\0';
    const bool has_cert = cert != nullptr && *cert != '\0';
    const bool has_key = key != nullptr && *key != '\0';
    if (has_cert != has_key) {
      return InvalidArgument(fmt::format("{} is set but {} is not: a client certificate needs both",
                                         has_cert ? "MEMCOORD_TLS_CERT" : "MEMCOORD_TLS_KEY",
                                         has_cert ? "MEMCOORD_TLS_KEY" : "MEMCOORD_TLS_CERT"));
    }
    if (!has_ca) {
      if (has_cert) {
        return InvalidArgument(
            "MEMCOORD_TLS_CERT and MEMCOORD_TLS_KEY are set but MEMCOORD_TLS_CA is not: mutual TLS needs the "
            "CA "
            "that signed the coordinator's certificate");
      }
      return Status::Ok();
    }
    MEMCOORD_ASSIGN_OR_RETURN(
        options.ca_pem, coordinator::ReadPemFile(ca, "MEMCOORD_TLS_CA", "the coordinator's CA certificate"));
    if (!has_cert) return Status::Ok();
    MEMCOORD_ASSIGN_OR_RETURN(options.cert_pem,
                              coordinator::ReadPemFile(cert, "MEMCOORD_TLS_CERT", "the client certificate"));
    MEMCOORD_ASSIGN_OR_RETURN(
        options.key_pem,
        coordinator::ReadPemFile(key, "MEMCOORD_TLS_KEY", "the client certificate's private key"));
    return Status::Ok();
  }
#endif
};

// Exit code for a failed operation: 2 for bad usage (the request itself is wrong), 1 otherwise.
inline int ExitCodeFor(const Status& status) { return status.code() == StatusCode::kInvalidArgument ? 2 : 1; }

}  // namespace memcoord::cli
