#include "common/logging.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace memcoord {

void SetUpLogging(const std::string& program, int rank) {
  const char* level = std::getenv("MEMCOORD_LOG_LEVEL");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
  std::string prefix = program;
  if (rank >= 0) prefix += "[" + std::to_string(rank) + "]";
  spdlog::set_pattern("%H:%M:%S.%e " + prefix + " %^%l%$ %v");
}

}  // namespace memcoord
