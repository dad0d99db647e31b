// memcoord-train: the reference data-parallel trainer. One process per rank (mpirun / memcoord-launch /
// srun). Each rank starts a memcoord Worker (device binding, named pools, the coordinator session), the
// planner places every model on its own group of ranks, and each group trains its MLP to imitate a fixed
// random teacher: forward, MSE loss, backward into GradientBucketer buckets averaged over the group's
// communicator, SGD with momentum. Steps end at the worker's safe point, where coordinator trims land.
// main() only wires the parts together; see examples/train/*.h for each.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "allocator/backend_factory.h"
#include "collectives/mpi_environment.h"
#include "common/bytes.h"
#include "common/logging.h"
#include "examples/train/comm_setup.h"
#include "examples/train/gradient_path.h"
#include "examples/train/random.h"
#include "examples/train/replica.h"
#include "examples/train/step_report.h"
#include "examples/train/train_options.h"
#include "worker/worker.h"

namespace memcoord::train {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t Reserved(const std::vector<CachingPool*>& pools, std::uint64_t PoolStats::*field) {
  std::uint64_t s = 0;
  for (const CachingPool* p : pools) s += p->stats().*field;
  return s;
}

// Leaves at once with a message naming the rank and what failed; mpirun (memcoord-launch) then stops the
// other ranks and reports this one.
[[noreturn]] void Fail(int rank, const std::string& what, const Status& status) {
  std::fprintf(stderr, "memcoord-train rank %d: %s: %s\n", rank, what.c_str(), status.ToString().c_str());
  MpiEnvironment::ExitWithoutFinalize(1);
}

int BatchFor(const TrainOptions& o, std::int64_t step) {
  if (!o.variable_batch) return o.batch;
  const int lo = o.batch / 2;
  return lo + static_cast<int>(SplitMix64(static_cast<std::uint64_t>(step) ^ o.seed) %
                               static_cast<std::uint64_t>(o.batch - lo + 1));
}

int Run(const TrainOptions& o, int rank) {
  WorkerOptions wo;
  wo.backend = o.backend;
  Result<std::uint64_t> capacity = ParseBytes(o.capacity);
  if (!capacity.ok()) Fail(rank, "--capacity", capacity.status());
  wo.capacity_bytes = *capacity;
  wo.report_interval = std::chrono::milliseconds(o.report_ms);
  Result<std::unique_ptr<Worker>> worker_or = Worker::init(wo);
  if (!worker_or.ok()) Fail(rank, "worker init", worker_or.status());
  Worker& worker = **worker_or;
  SetUpLogging("memcoord-train", rank);
  const int world = worker.topology().world_size;
  const int device = worker.device();

  // Math where the worker's memory is: CUDA kernels on a GPU, plain loops on the host backend.
  std::unique_ptr<TensorMath> math;
  if (device >= 0) {
    Result<std::unique_ptr<TensorMath>> cuda = MakeCudaMath();
    if (!cuda.ok()) Fail(rank, "device math", cuda.status());
    math = std::move(*cuda);
  } else {
    math = MakeHostMath();
  }
  std::vector<CachingPool*> pools;
  for (const char* name : {"params", "gradients", "activations"}) {
    PoolOptions po;
    po.name = name;
    Result<CachingPool*> pool = worker.create_pool(po);
    if (!pool.ok()) Fail(rank, std::string("pool ") + name, pool.status());
    pools.push_back(*pool);
  }
  CachingPool& params_pool = *pools[0];
  CachingPool& grad_pool = *pools[1];
  CachingPool& act_pool = *pools[2];

  // Each rank's share of its device: ranks on one GPU (same host, same ordinal) split it; the planner sees
  // every rank's share. Raw MPI here: the communicators are split by the plan this feeds.
  const DeviceInfo info = worker.backend().device_info();
  const std::int64_t key = device < 0 ? -1 - rank : DeviceKey(device);  // host ranks never share
  std::vector<std::int64_t> keys(static_cast<std::size_t>(world));
  if (MPI_Allgather(&key, 1, MPI_INT64_T, keys.data(), 1, MPI_INT64_T, MPI_COMM_WORLD) != MPI_SUCCESS)
    Fail(rank, "placement", Unavailable("MPI_Allgather of device keys failed"));
  const auto sharing = static_cast<std::uint64_t>(std::count(keys.begin(), keys.end(), key));
  std::uint64_t share = info.total_bytes / std::max<std::uint64_t>(1, sharing);
  std::vector<std::uint64_t> shares(static_cast<std::size_t>(world));
  if (MPI_Allgather(&share, 1, MPI_UINT64_T, shares.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD) != MPI_SUCCESS)
    Fail(rank, "placement", Unavailable("MPI_Allgather of device shares failed"));
  Result<GroupPlan> plan = PlanGroups(o.models, shares, o.batch, o.eval_batch);
  if (!plan.ok()) Fail(rank, "placement", plan.status());
  const int model = plan->model_of_rank(rank);
  const ModelConfig& config = o.models[static_cast<std::size_t>(model)];

  Result<RankComms> comms = SetUpComms(plan->group_of_model[static_cast<std::size_t>(model)], device, o.comm,
                                       std::chrono::seconds(o.timeout_s));
  if (!comms.ok()) Fail(rank, "communicators", comms.status());
  Communicator* gradients_comm = comms->gradients;
  worker.on_abort([gradients_comm](const std::string& reason) { gradients_comm->abort(reason); });

  // Host buckets for staged gradients (device math over MPI): a host pool of the trainer's own.
  std::unique_ptr<DeviceBackend> staging_backend;
  std::unique_ptr<CachingPool> staging_pool;
  CachingPool* bucket_pool = &grad_pool;
  if (math->on_device() && !gradients_comm->device_buffers()) {
    BackendOptions bo;
    bo.capacity_bytes =
        std::max<std::uint64_t>(std::uint64_t{1} << 30, 4 * config.shape.parameter_count() * sizeof(float));
    Result<std::unique_ptr<DeviceBackend>> host = MakeBackend("host", bo);
    if (!host.ok()) Fail(rank, "staging backend", host.status());
    staging_backend = std::move(*host);
    PoolOptions po;
    po.name = "grad-staging";
    staging_pool = std::make_unique<CachingPool>(*staging_backend, po);
    bucket_pool = staging_pool.get();
  }

  MlpShape teacher_shape = config.shape;
  teacher_shape.hidden = std::max(4, config.shape.hidden / 2);
  teacher_shape.depth = 1;
  const auto model_id = static_cast<std::uint64_t>(model);
  Result<std::unique_ptr<Mlp>> teacher =
      Mlp::Create(params_pool, *math, teacher_shape, StreamSeed(o.seed, model_id, 1, 0), false);
  if (!teacher.ok()) Fail(rank, "teacher", teacher.status());
  Result<std::unique_ptr<Mlp>> student =
      Mlp::Create(params_pool, *math, config.shape, StreamSeed(o.seed, model_id, 2, 0), true);
  if (!student.ok()) Fail(rank, "model", student.status());
  Result<std::unique_ptr<GradientPath>> path_or =
      GradientPath::Create(*gradients_comm, *math, **student, *bucket_pool, grad_pool);
  if (!path_or.ok()) Fail(rank, "gradient buckets", path_or.status());
  GradientPath& path = **path_or;
  Result<TagId> act_tag = act_pool.tag("activations");
  Result<TagId> eval_tag = act_pool.tag("eval");
  if (!act_tag.ok() || !eval_tag.ok())
    Fail(rank, "tags", act_tag.ok() ? eval_tag.status() : act_tag.status());

  if (rank == 0) {
    const char* coordinator = std::getenv("MEMCOORD_COORDINATOR");
    std::printf("memcoord-train: %d ranks | backend %s (%s, %s per rank) | math: %s | coordinator: %s\n",
                world, info.kind.c_str(), info.name.c_str(), FormatBytes(share).c_str(), math->name(),
                coordinator && *coordinator ? coordinator : "none (standalone)");
    for (std::size_t m = 0; m < o.models.size(); ++m) {
      const std::size_t g = static_cast<std::size_t>(plan->group_of_model[m]);
      const std::vector<int>& ranks = plan->ranks_of_group[g];
      const std::string where = ranks.size() == 1 ? fmt::format("rank {}", ranks.front())
                                                  : fmt::format("ranks {}-{}", ranks.front(), ranks.back());
      std::printf("%s\n",
                  fmt::format("placement: model {} ({} x {} hidden, {} params, {} per replica) -> device "
                              "group {} = {} ({} each)",
                              o.models[m].name, o.models[m].shape.depth, o.models[m].shape.hidden,
                              o.models[m].shape.parameter_count(), FormatBytes(plan->model_bytes[m]), g,
                              where, FormatBytes(plan->group_capacity_bytes[g]))
                      .c_str());
    }
    std::printf("placement planned in %.2f ms by the planner's whole-model packer\n", plan->planning_ms);
    std::fflush(stdout);
  }
  // How each group's gradients travel (the groups may differ): gathered so rank 0 prints them in order.
  {
    constexpr std::size_t kLine = 256;
    std::string line;
    if (comms->group->rank() == 0) {
      line = fmt::format("model {}: {}, {} gradient buckets{}", config.name, comms->why, path.buckets(),
                         path.staged() ? ", device gradients staged through host memory" : "");
    }
    line.resize(kLine, '\0');
    std::vector<char> lines(kLine * static_cast<std::size_t>(world));
    if (Status s = comms->world->allgather(line.data(), lines.data(), kLine / 4, DataType::kInt32); !s.ok())
      Fail(rank, "setup gather", s);
    if (rank == 0) {
      for (int r = 0; r < world; ++r) {
        const char* text = lines.data() + kLine * static_cast<std::size_t>(r);
        if (*text != '\0') std::printf("%.*s\n", static_cast<int>(strnlen(text, kLine)), text);
      }
      std::fflush(stdout);
    }
  }

  // With a coordinator, start training only once every rank is attached, so commands reach all of them.
  const char* coordinator_env = std::getenv("MEMCOORD_COORDINATOR");
  if (coordinator_env != nullptr && *coordinator_env != '\0' && o.attach_timeout_s > 0) {
    const auto deadline = Clock::now() + std::chrono::seconds(o.attach_timeout_s);
    while (!worker.attached() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::int64_t attached = worker.attached() ? 1 : 0;
    if (Status s = comms->world->allreduce(&attached, &attached, 1, DataType::kInt64, ReduceOp::kSum);
        !s.ok())
      Fail(rank, "attach check", s);
    if (rank == 0) {
      std::printf("coordinator %s: %lld/%d ranks attached%s\n", coordinator_env,
                  static_cast<long long>(attached), world,
                  attached == world ? "" : " (the others keep trying in the background)");
      std::fflush(stdout);
    }
  }

  Replica replica(ReplicaParts{*math, **teacher, **student, path, *comms->group, act_pool, *act_tag,
                               *eval_tag, o.seed, model_id, o.lr, o.momentum});
  StepReporter reporter(*comms->world, o.models, *plan, o.steps, o.print_every);
  std::vector<std::uint64_t> seen_trims;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    const auto start = Clock::now();
    worker.step_begin();
    StepRecord rec;
    rec.model = model;
    rec.step = step;
    rec.batch = BatchFor(o, step);
    Result<double> loss = replica.TrainStep(step, rec.batch);
    if (!loss.ok()) Fail(rank, "training", loss.status());
    rec.loss = *loss;
    if ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps) {
      Result<double> eval = replica.Evaluate(step, o.eval_batch);
      if (!eval.ok()) Fail(rank, "evaluation", eval.status());
      rec.eval_loss = *eval;
    }
    if (Status s = math->sync(); !s.ok()) Fail(rank, "sync", s);
    const auto pace = start + std::chrono::milliseconds(o.min_step_ms);
    if (Clock::now() < pace) std::this_thread::sleep_until(pace);

    rec.reserved_before = Reserved(pools, &PoolStats::reserved_bytes);
    if (Status s = worker.step_end(); !s.ok()) Fail(rank, "step_end", s);
    rec.reserved_after = Reserved(pools, &PoolStats::reserved_bytes);
    for (const AppliedCommand& c : worker.applied_commands()) {
      if (c.kind != AppliedCommand::Kind::kTrim) continue;
      if (std::find(seen_trims.begin(), seen_trims.end(), c.command_id) != seen_trims.end()) continue;
      seen_trims.push_back(c.command_id);
      rec.trim_step = c.step;
      rec.released += c.released_bytes;
    }
    rec.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (Status s = reporter.record(rec); !s.ok()) Fail(rank, "progress", s);
  }

  RankSummary summary;
  summary.model = model;
  Result<std::uint64_t> checksum = (*student)->checksum(*math);
  if (!checksum.ok()) Fail(rank, "checksum", checksum.status());
  summary.checksum = *checksum;
  summary.peak_reserved = Reserved(pools, &PoolStats::peak_reserved_bytes);
  summary.reserved = Reserved(pools, &PoolStats::reserved_bytes);
  summary.peak_allocated = Reserved(pools, &PoolStats::peak_allocated_bytes);
  summary.device = device;
  Result<Verdict> verdict = reporter.finish(summary);
  if (!verdict.ok()) Fail(rank, "report", verdict.status());
  worker.shutdown();
  const bool ok =
      verdict->losses_fell && verdict->weights_identical && (!o.require_trim || verdict->trims_aligned);
  if (!ok && rank == 0) {
    std::fprintf(
        stderr, "memcoord-train: FAILED (%s%s%s)\n", verdict->losses_fell ? "" : "a loss did not fall; ",
        verdict->weights_identical ? "" : "weights differ between ranks; ",
        o.require_trim && !verdict->trims_aligned ? "no cluster trim on every rank at one step" : "");
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace memcoord::train

int main(int argc, char** argv) {
  int exit_code = 0;
  memcoord::Result<memcoord::train::TrainOptions> options =
      memcoord::train::ParseTrainOptions(argc, argv, &exit_code);
  if (!options.ok()) {
    std::fprintf(stderr, "memcoord-train: %s\n", options.status().message().c_str());
    return 2;
  }
  if (options->help_printed) return exit_code;
  memcoord::Result<std::unique_ptr<memcoord::MpiEnvironment>> mpi =
      memcoord::MpiEnvironment::Init(&argc, &argv);
  if (!mpi.ok()) {
    std::fprintf(stderr, "memcoord-train: %s\n", mpi.status().ToString().c_str());
    return 1;
  }
  const int code = memcoord::train::Run(*options, (*mpi)->world_rank());
  return code;
}
