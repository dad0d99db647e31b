// TrainOptions: memcoord-train's command line, parsed and checked. `--model NAME:HIDDEN[:DEPTH]` may be
// repeated (one data-parallel group per model). Errors: INVALID_ARGUMENT naming the option; --help prints
// usage and returns CANCELLED-free OK with `help_printed` set.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "examples/train/group_plan.h"

namespace memcoord::train {

struct TrainOptions {
  std::vector<ModelConfig> models;
  int steps = 100;
  int batch = 128;
  bool variable_batch = false;  // each step's batch is drawn from [batch/2, batch]
  float lr = 0.02f;
  float momentum = 0.9f;
  int eval_every = 0;  // 0: evaluate after the last step only
  int eval_batch = 8192;
  std::string backend = "auto";   // auto | host | cuda | cuda-vmm
  std::string capacity = "2GiB";  // host backend: each rank's simulated device
  std::string comm = "auto";      // auto | mpi | nccl
  int print_every = 10;
  int min_step_ms = 0;        // pace steps (the demo uses it to keep the display readable)
  bool require_trim = false;  // fail unless a cluster trim happened on every rank at one step
  int timeout_s = 120;        // collectives
  std::uint64_t seed = 1;
  int report_ms = 200;        // worker reports to the coordinator
  int attach_timeout_s = 30;  // with a coordinator: wait this long for every rank to attach before step 1
  bool help_printed = false;
};

// The model list syntax: "a:192,b:96:3" (name:hidden[:depth]); input 32 and output 8 features.
Result<std::vector<ModelConfig>> ParseModels(const std::vector<std::string>& specs, int in, int out);
// Returns the process exit code to use when parsing ends the program (help: 0, errors: 2) through
// `exit_code`.
Result<TrainOptions> ParseTrainOptions(int argc, char** argv, int* exit_code);

}  // namespace memcoord::train
