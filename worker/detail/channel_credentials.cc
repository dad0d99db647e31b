// MakeChannelCredentials (worker_credentials.h): the gRPC half, kept apart so builds without gRPC still
// resolve tokens.
#include <grpcpp/security/credentials.h>

#include "worker/detail/worker_credentials.h"

namespace memcoord::detail {

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials(const WorkerCredentials& credentials) {
  if (!credentials.tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = credentials.ca_pem;
  options.pem_private_key = credentials.key_pem;  // both empty: server-authenticated TLS only
  options.pem_cert_chain = credentials.cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace memcoord::detail
