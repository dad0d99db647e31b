// WorkerCredentials: what a worker presents to the coordinator, resolved once at Worker::init().
//   token: WorkerOptions::token, else $MEMCOORD_TOKEN, else the first line of $MEMCOORD_TOKEN_FILE.
//   TLS:   $MEMCOORD_TLS_CA (a PEM file of the CA that signed the coordinator's certificate) set means a
//          TLS channel; $MEMCOORD_TLS_CERT + $MEMCOORD_TLS_KEY (PEM) add a client certificate (mutual TLS).
//          WorkerOptions::tls_* paths, when set, take the place of the variables.
// Every file is read and checked here, so a bad set-up fails init() with INVALID_ARGUMENT naming the
// variable and the path (unreadable, not PEM, a certificate without its key, a key that does not belong to
// the certificate) instead of a TLS handshake failing later, over and over, in the session's log.
//
// MakeChannelCredentials turns them into gRPC channel credentials (insecure without a CA). Plain functions,
// thread-safe; no gRPC type is defined here (a forward declaration only).
#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace grpc {
class ChannelCredentials;
}

namespace memcoord::detail {

struct TlsPaths {
  std::string ca;    // empty: $MEMCOORD_TLS_CA
  std::string cert;  // empty: $MEMCOORD_TLS_CERT
  std::string key;   // empty: $MEMCOORD_TLS_KEY
};

struct WorkerCredentials {
  std::string token;  // empty: none
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  bool tls() const { return !ca_pem.empty(); }
};

Result<WorkerCredentials> ResolveWorkerCredentials(const std::string& token, const TlsPaths& paths);

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const WorkerCredentials& credentials);

}  // namespace memcoord::detail
