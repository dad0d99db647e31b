#include "coordinator/service/pem_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace memcoord::coordinator {

Result<std::string> ReadPemFile(const std::string& path, std::string_view source, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument(fmt::format("{} '{}' cannot be read ({}); expected {} (PEM)", source, path,
                                       std::strerror(errno), what));
  }
  std::stringstream text;
  text << in.rdbuf();
  if (text.str().find("-----BEGIN ") == std::string::npos) {
    return InvalidArgument(
        fmt::format("{} '{}' is not a PEM file (no '-----BEGIN' line); expected {}", source, path, what));
  }
  return text.str();
}

}  // namespace memcoord::coordinator
