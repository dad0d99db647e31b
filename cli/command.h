// A subcommand of the `memcoord` binary: each lives in its own file and registers itself with the root app.
// `run` is called when the subcommand was chosen and returns the process exit code (0 success, 1 failure of
// the operation, 2 bad usage). Subcommands print machine-first JSON with --json, human tables otherwise.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace memcoord::cli {

struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// One function per subcommand file. Add a line here and one in main.cc when adding a subcommand.
Subcommand AddReplayCommand(CLI::App& root);
Subcommand AddCoordinatorCommand(CLI::App& root);
Subcommand AddStatusCommand(CLI::App& root);
Subcommand AddTrimCommand(CLI::App& root);
Subcommand AddQuotaCommand(CLI::App& root);
Subcommand AddEstimateCommand(CLI::App& root);
Subcommand AddPlanCommand(CLI::App& root);

}  // namespace memcoord::cli
