#include "examples/train/train_options.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

namespace memcoord::train {
namespace {

Result<int> ParseInt(const std::string& text, const std::string& what, int lo, int hi) {
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  return InvalidArgument(what + " must be a whole number in [" + std::to_string(lo) + ", " +
                         std::to_string(hi) + "], got '" + text + "'");
}

}  // namespace

Result<std::vector<ModelConfig>> ParseModels(const std::vector<std::string>& specs, int in, int out) {
  std::vector<ModelConfig> models;
  for (const std::string& spec : specs) {
    std::vector<std::string> parts;
    std::stringstream ss(spec);
    for (std::string part; std::getline(ss, part, ':');) parts.push_back(part);
    if (parts.size() < 2 || parts.size() > 3 || parts[0].empty()) {
      return InvalidArgument("--model '" + spec + "': expected NAME:HIDDEN[:DEPTH], e.g. a:192 or b:96:3");
    }
    ModelConfig m;
    m.name = parts[0];
    m.shape.in = in;
    m.shape.out = out;
    MEMCOORD_ASSIGN_OR_RETURN(m.shape.hidden,
                              ParseInt(parts[1], "--model " + m.name + " hidden width", 1, 16384));
    if (parts.size() == 3) {
      MEMCOORD_ASSIGN_OR_RETURN(m.shape.depth, ParseInt(parts[2], "--model " + m.name + " depth", 1, 64));
    }
    for (const ModelConfig& other : models) {
      if (other.name == m.name) return InvalidArgument("--model: the name '" + m.name + "' is used twice");
    }
    models.push_back(m);
  }
  if (models.empty()) return InvalidArgument("--model: at least one model is required");
  return models;
}

Result<TrainOptions> ParseTrainOptions(int argc, char** argv, int* exit_code) {
  TrainOptions o;
  std::vector<std::string> model_specs = {"mlp:128"};
  int in = 32;
  int out = 8;
  CLI::App app{
      "memcoord-train: data-parallel training of small MLPs on synthetic teacher data, one rank per GPU "
      "(host memory standing in for a GPU where there is none). Run it under mpirun or memcoord-launch."};
  app.add_option("--model", model_specs,
                 "NAME:HIDDEN[:DEPTH]; repeat (or comma-separate) for several models, "
                 "each trained by its own group of ranks")
      ->delimiter(',');
  app.add_option("--in", in, "input features")->check(CLI::Range(1, 4096));
  app.add_option("--out", out, "output features")->check(CLI::Range(1, 4096));
  app.add_option("--steps", o.steps, "training steps")->check(CLI::Range(1, 10000000));
  app.add_option("--batch", o.batch, "rows per rank per step")->check(CLI::Range(2, 1 << 20));
  app.add_flag("--variable-batch", o.variable_batch, "draw each step's batch from [batch/2, batch]");
  app.add_option("--lr", o.lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 0.999));
  app.add_option("--eval-every", o.eval_every, "evaluate every N steps (0: after the last step only)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--eval-batch", o.eval_batch, "rows in one evaluation pass (large temporaries)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--backend", o.backend, "auto (cuda-vmm on a GPU, host otherwise) | host | cuda | cuda-vmm");
  app.add_option("--capacity", o.capacity, "host backend: each rank's simulated device size");
  app.add_option("--comm", o.comm, "gradient communicator: auto | mpi | nccl");
  app.add_option("--print-every", o.print_every, "progress line every N steps")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--min-step-ms", o.min_step_ms, "pace each step to at least this long")
      ->check(CLI::Range(0, 60000));
  app.add_flag("--require-trim", o.require_trim,
               "exit 1 unless a cluster trim ran on every rank at one step");
  app.add_option("--timeout-s", o.timeout_s, "collective timeout")->check(CLI::Range(1, 86400));
  app.add_option("--seed", o.seed, "data and initialisation seed");
  app.add_option("--report-ms", o.report_ms, "worker report interval")->check(CLI::Range(10, 60000));
  app.add_option(
         "--attach-timeout-s", o.attach_timeout_s,
         "with a coordinator, wait up to this long for every rank to attach before training (0: do not wait)")
      ->check(CLI::Range(0, 3600));
  app.footer(
      "Exit codes: 0 trained and verified; 1 failed (a check, a collective timeout, a set-up error); 2 bad "
      "options; 75 (MEMCOORD_EXIT_ABORTED) the coordinator aborted the group because another rank died (the "
      "message names it): restart the job.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    if (*exit_code == 0) {
      o.help_printed = true;
      return o;
    }
    return InvalidArgument(e.what());
  }
  MEMCOORD_ASSIGN_OR_RETURN(o.models, ParseModels(model_specs, in, out));
  return o;
}

}  // namespace memcoord::train
