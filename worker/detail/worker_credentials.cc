#include "worker/detail/worker_credentials.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#ifdef MEMCOORD_HAVE_OPENSSL
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#endif

#include "common/token.h"

namespace memcoord::detail {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// A path from the options, else from the variable; `source` says which, for error messages.
struct Setting {
  std::string source;  // "MEMCOORD_TLS_CA" or "WorkerOptions::tls_ca"
  std::string path;
};

Setting Pick(const std::string& option_path, const char* option_name, const char* variable) {
  if (!option_path.empty()) return {option_name, option_path};
  return {variable, Env(variable)};
}

Result<std::string> ReadWhole(const Setting& s) {
  std::ifstream in(s.path, std::ios::binary);
  if (!in)
    return InvalidArgument(fmt::format("{}='{}' cannot be read: {}", s.source, s.path, std::strerror(errno)));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Result<std::string> ReadPem(const Setting& s, const char* what) {
  MEMCOORD_ASSIGN_OR_RETURN(std::string text, ReadWhole(s));
  if (text.find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(
        fmt::format("{}='{}' is not a PEM file (no '-----BEGIN' line); expected {}", s.source, s.path, what));
  }
  return text;
}

Result<std::string> TokenFrom(const std::string& option_token) {
  if (!option_token.empty()) {
    MEMCOORD_RETURN_IF_ERROR(CheckToken(option_token, "WorkerOptions::token"));
    return option_token;
  }
  std::string token = Env("MEMCOORD_TOKEN");
  if (!token.empty()) {
    MEMCOORD_RETURN_IF_ERROR(CheckToken(token, "MEMCOORD_TOKEN"));
    return token;
  }
  const Setting file{"MEMCOORD_TOKEN_FILE", Env("MEMCOORD_TOKEN_FILE")};
  if (file.path.empty()) return std::string();
  MEMCOORD_ASSIGN_OR_RETURN(std::string text, ReadWhole(file));
  std::istringstream lines(text);
  std::getline(lines, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  if (token.empty()) {
    return InvalidArgument(
        fmt::format("MEMCOORD_TOKEN_FILE='{}' is empty; expected the token on its first line", file.path));
  }
  MEMCOORD_RETURN_IF_ERROR(CheckToken(token, fmt::format("MEMCOORD_TOKEN_FILE='{}'", file.path)));
  return token;
}

#ifdef MEMCOORD_HAVE_OPENSSL
// Parses the PEMs and checks that the key belongs to the certificate.
Status CheckPair(const Setting& cert_setting, const std::string& cert_pem, const Setting& key_setting,
                 const std::string& key_pem) {
  BIO* cert_bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  BIO_free(cert_bio);
  if (cert == nullptr) {
    return InvalidArgument(
        fmt::format("{}='{}' holds no readable X.509 certificate", cert_setting.source, cert_setting.path));
  }
  BIO* key_bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  Status status;
  if (key == nullptr) {
    status = InvalidArgument(fmt::format("{}='{}' holds no readable (unencrypted) private key",
                                         key_setting.source, key_setting.path));
  } else if (X509_check_private_key(cert, key) != 1) {
    status = InvalidArgument(fmt::format("{}='{}' is not the key of the certificate in {}='{}'",
                                         key_setting.source, key_setting.path, cert_setting.source,
                                         cert_setting.path));
  }
  EVP_PKEY_free(key);
  X509_free(cert);
  return status;
}

Status CheckCa(const Setting& s, const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  if (ca == nullptr) {
    return InvalidArgument(fmt::format("{}='{}' holds no readable X.509 certificate", s.source, s.path));
  }
  X509_free(ca);
  return Status::Ok();
}
#else
Status CheckPair(const Setting&, const std::string&, const Setting&, const std::string&) {
  return Status::Ok();
}
Status CheckCa(const Setting&, const std::string&) { return Status::Ok(); }
#endif

}  // namespace

Result<WorkerCredentials> ResolveWorkerCredentials(const std::string& token, const TlsPaths& paths) {
  WorkerCredentials out;
  MEMCOORD_ASSIGN_OR_RETURN(out.token, TokenFrom(token));
  const Setting ca = Pick(paths.ca, "WorkerOptions::tls_ca", "MEMCOORD_TLS_CA");
  const Setting cert = Pick(paths.cert, "WorkerOptions::tls_cert", "MEMCOORD_TLS_CERT");
  const Setting key = Pick(paths.key, "WorkerOptions::tls_key", "MEMCOORD_TLS_KEY");
  if (cert.path.empty() != key.path.empty()) {
    const Setting& set = cert.path.empty() ? key : cert;
    const Setting& missing = cert.path.empty() ? cert : key;
    return InvalidArgument(fmt::format("{}='{}' is set but {} is not: a client certificate needs both",
                                       set.source, set.path, missing.source));
  }
  if (ca.path.empty()) {
    if (!cert.path.empty()) {
      return InvalidArgument(
          fmt::format("{} and {} are set but {} is not: mutual TLS needs the CA that signed the "
                      "coordinator's certificate",
                      cert.source, key.source, ca.source));
    }
    return out;  // no TLS
  }
  MEMCOORD_ASSIGN_OR_RETURN(out.ca_pem, ReadPem(ca, "the CA certificate"));
  MEMCOORD_RETURN_IF_ERROR(CheckCa(ca, out.ca_pem));
  if (cert.path.empty()) return out;
  MEMCOORD_ASSIGN_OR_RETURN(out.cert_pem, ReadPem(cert, "the client certificate"));
  MEMCOORD_ASSIGN_OR_RETURN(out.key_pem, ReadPem(key, "the client certificate's private key"));
  MEMCOORD_RETURN_IF_ERROR(CheckPair(cert, out.cert_pem, key, out.key_pem));
  return out;
}

}  // namespace memcoord::detail
