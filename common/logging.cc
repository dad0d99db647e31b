#include "common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <memory>
#include <mutex>

namespace memcoord {

void SetUpLogging(const std::string& program, int rank) {
  const char* level = std::getenv("MEMCOORD_LOG_LEVEL");
  spdlog::set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
  std::string prefix = program;
  if (rank >= 0) prefix += "[" + std::to_string(rank) + "]";
  spdlog::set_pattern("%H:%M:%S.%e " + prefix + " %^%l%$ %v");
}

void SetUpLibraryLogging(int rank) {
  static std::once_flag to_stderr;
  // Made directly, not through spdlog's registry (which throws when a logger of that name exists).
  std::call_once(to_stderr, [] {
    spdlog::set_default_logger(std::make_shared<spdlog::logger>(
        "memcoord", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
  });
  SetUpLogging("memcoord", rank);
}

}  // namespace memcoord
