// memcoord: the command-line entry point. main() only parses arguments; each subcommand lives in its file.
#include <cstdio>
#include <vector>

#include "cli/command.h"
#include "common/logging.h"

int main(int argc, char** argv) {
  memcoord::SetUpLogging("memcoord");
  CLI::App root{"memcoord: GPU memory coordination for multi-GPU training"};
  root.require_subcommand(1);
  std::vector<memcoord::cli::Subcommand> subcommands = {
      memcoord::cli::AddReplayCommand(root), memcoord::cli::AddCoordinatorCommand(root),
      memcoord::cli::AddStatusCommand(root), memcoord::cli::AddTrimCommand(root),
      memcoord::cli::AddQuotaCommand(root),  memcoord::cli::AddEstimateCommand(root),
      memcoord::cli::AddPlanCommand(root),
  };
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help and version exit 0; every usage error exits 2, as the command-line contract says.
    const int code = root.exit(e);
    return code == 0 ? 0 : 2;
  }
  for (auto& sub : subcommands) {
    if (sub.app->parsed()) return sub.run();
  }
  std::fprintf(stderr, "memcoord: no subcommand chosen\n");
  return 2;
}
