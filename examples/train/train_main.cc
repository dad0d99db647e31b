// memcoord-train: the reference data-parallel trainer. One process per rank (mpirun / memcoord-launch /
// srun). Each rank starts a memcoord Worker (device binding, named pools, the coordinator session), the
// planner places every model on its own group of ranks, and each group trains its MLP to imitate a fixed
// random teacher: forward, MSE loss, backward into GradientBucketer buckets averaged over the group's
// communicator, SGD with momentum. Steps end at the worker's safe point, where coordinator trims land.
// When the coordinator aborts the group (another rank died), every communicator is aborted and the rank
// exits with code 75 (MEMCOORD_EXIT_ABORTED) naming the dead rank (abort_exit.h).
// main() only wires the parts together; see examples/train/*.h for each.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "allocator/backend_factory.h"
#include "collectives/mpi_environment.h"
#include "common/bytes.h"
#include "common/logging.h"
#include "examples/train/abort_exit.h"
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

// How long the training thread has to leave by itself once the group is aborted before the backstop ends the
// process (the same as the Python package's backstop).
constexpr std::chrono::milliseconds kAbortBackstop{1500};

// A step or collective failed. When the coordinator aborted the group (a peer died; the abort hook aborted
// every communicator, so this is how a blocked collective returns), leaves with kExitAborted naming the
// dead rank and the reason; otherwise as Fail.
[[noreturn]] void FailStep(const Worker& worker, int rank, const std::string& what, const Status& status) {
  if (std::optional<AbortInfo> abort = worker.abort_info()) ExitAborted(rank, DescribeAbort(*abort));
  Fail(rank, what, status);
}

int BatchFor(const TrainOptions& o, std::int64_t step) {
  if (!o.variable_batch) return o.batch;
  const int lo = o.batch / 2;
  return lo + static_cast<int>(SplitMix64(static_cast<std::uint64_t>(step) ^ o.seed) %
                               static_cast<std::uint64_t>(o.batch - lo + 1));
}

// The worker this rank runs under: device binding, pools, the coordinator session.
std::unique_ptr<Worker> StartWorker(const TrainOptions& o, int rank) {
  WorkerOptions wo;
  wo.backend = o.backend;
  Result<std::uint64_t> capacity = ParseBytes(o.capacity);
  if (!capacity.ok()) Fail(rank, "--capacity", capacity.status());
  wo.capacity_bytes = *capacity;
  wo.report_interval = std::chrono::milliseconds(o.report_ms);
  Result<std::unique_ptr<Worker>> worker = Worker::init(wo);
  if (!worker.ok()) Fail(rank, "worker init", worker.status());
  SetUpLogging("memcoord-train", rank);
  // Until the communicators exist (ConnectGroup arms the hook again with them), an abort during set-up,
  // e.g. inside the placement's raw MPI all-gathers, ends the rank through the backstop alone.
  ArmAbortExit(**worker, {}, rank, kAbortBackstop);
  return *std::move(worker);
}

// Math where the worker's memory is: CUDA kernels on a GPU, plain loops on the host backend.
std::unique_ptr<TensorMath> MakeMath(int device, int rank) {
  if (device < 0) return MakeHostMath();
  Result<std::unique_ptr<TensorMath>> cuda = MakeCudaMath();
  if (!cuda.ok()) Fail(rank, "device math", cuda.status());
  return *std::move(cuda);
}

// The rank's three named pools; `all` lists them for the memory figures of the report.
struct RankPools {
  CachingPool* params = nullptr;
  CachingPool* gradients = nullptr;
  CachingPool* activations = nullptr;
  std::vector<CachingPool*> all;
};

RankPools CreatePools(Worker& worker, int rank) {
  RankPools pools;
  for (const char* name : {"params", "gradients", "activations"}) {
    PoolOptions po;
    po.name = name;
    Result<CachingPool*> pool = worker.create_pool(po);
    if (!pool.ok()) Fail(rank, std::string("pool ") + name, pool.status());
    pools.all.push_back(*pool);
  }
  pools.params = pools.all[0];
  pools.gradients = pools.all[1];
  pools.activations = pools.all[2];
  return pools;
}

struct Placement {
  DeviceInfo device;
  std::uint64_t share_bytes = 0;  // this rank's share of its device
  GroupPlan plan;
};

// Each rank's share of its device: ranks on one GPU (same host, same ordinal) split it; the planner sees
// every rank's share. Raw MPI here: the communicators are split by the plan this feeds.
Placement PlanPlacement(const TrainOptions& o, Worker& worker, int rank) {
  const int world = worker.topology().world_size;
  const int device = worker.device();
  Placement placement;
  placement.device = worker.backend().device_info();
  const std::int64_t key = device < 0 ? -1 - rank : DeviceKey(device);  // host ranks never share
  std::vector<std::int64_t> keys(static_cast<std::size_t>(world));
  if (MPI_Allgather(&key, 1, MPI_INT64_T, keys.data(), 1, MPI_INT64_T, MPI_COMM_WORLD) != MPI_SUCCESS)
    Fail(rank, "placement", Unavailable("MPI_Allgather of device keys failed"));
  const auto sharing = static_cast<std::uint64_t>(std::count(keys.begin(), keys.end(), key));
  placement.share_bytes = placement.device.total_bytes / std::max<std::uint64_t>(1, sharing);
  std::vector<std::uint64_t> shares(static_cast<std::size_t>(world));
  if (MPI_Allgather(&placement.share_bytes, 1, MPI_UINT64_T, shares.data(), 1, MPI_UINT64_T,
                    MPI_COMM_WORLD) != MPI_SUCCESS)
    Fail(rank, "placement", Unavailable("MPI_Allgather of device shares failed"));
  Result<GroupPlan> plan = PlanGroups(o.models, shares, o.batch, o.eval_batch);
  if (!plan.ok()) Fail(rank, "placement", plan.status());
  placement.plan = *std::move(plan);
  return placement;
}

// The communicators of this rank's group. An abort from the coordinator aborts every one of them, so the
// training thread leaves whichever collective it is in (the step's gradients, the reporter's world
// all-gather) and exits with kExitAborted; see abort_exit.h.
RankComms ConnectGroup(const TrainOptions& o, const GroupPlan& plan, int model, Worker& worker, int rank) {
  Result<RankComms> comms = SetUpComms(plan.group_of_model[static_cast<std::size_t>(model)], worker.device(),
                                       o.comm, std::chrono::seconds(o.timeout_s));
  if (!comms.ok()) FailStep(worker, rank, "communicators", comms.status());
  ArmAbortExit(worker, {comms->world.get(), comms->group.get(), comms->nccl.get()}, rank, kAbortBackstop);
  return *std::move(comms);
}

// Where gradient buckets live: the gradients pool, or (device math over MPI) a host pool of the trainer's
// own for staged gradients. Declared members in destruction order: the pool before its backend.
struct BucketMemory {
  std::unique_ptr<DeviceBackend> staging_backend;
  std::unique_ptr<CachingPool> staging_pool;
  CachingPool* pool = nullptr;
};

BucketMemory BucketMemoryFor(const TensorMath& math, const Communicator& gradients_comm,
                             const ModelConfig& config, CachingPool& grad_pool, int rank) {
  BucketMemory memory;
  memory.pool = &grad_pool;
  if (!math.on_device() || gradients_comm.device_buffers()) return memory;
  BackendOptions bo;
  bo.capacity_bytes =
      std::max<std::uint64_t>(std::uint64_t{1} << 30, 4 * config.shape.parameter_count() * sizeof(float));
  Result<std::unique_ptr<DeviceBackend>> host = MakeBackend("host", bo);
  if (!host.ok()) Fail(rank, "staging backend", host.status());
  memory.staging_backend = std::move(*host);
  PoolOptions po;
  po.name = "grad-staging";
  memory.staging_pool = std::make_unique<CachingPool>(*memory.staging_backend, po);
  memory.pool = memory.staging_pool.get();
  return memory;
}

// The fixed random teacher that labels the data, the student this group trains, and its gradient path.
struct RankModels {
  std::unique_ptr<Mlp> teacher;
  std::unique_ptr<Mlp> student;
  std::unique_ptr<GradientPath> path;
};

RankModels CreateModels(const TrainOptions& o, int model, TensorMath& math, CachingPool& params_pool,
                        Communicator& gradients_comm, CachingPool& bucket_pool, CachingPool& grad_pool,
                        int rank) {
  const ModelConfig& config = o.models[static_cast<std::size_t>(model)];
  MlpShape teacher_shape = config.shape;
  teacher_shape.hidden = std::max(4, config.shape.hidden / 2);
  teacher_shape.depth = 1;
  const auto model_id = static_cast<std::uint64_t>(model);
  RankModels models;
  Result<std::unique_ptr<Mlp>> teacher =
      Mlp::Create(params_pool, math, teacher_shape, StreamSeed(o.seed, model_id, 1, 0), false);
  if (!teacher.ok()) Fail(rank, "teacher", teacher.status());
  models.teacher = *std::move(teacher);
  Result<std::unique_ptr<Mlp>> student =
      Mlp::Create(params_pool, math, config.shape, StreamSeed(o.seed, model_id, 2, 0), true);
  if (!student.ok()) Fail(rank, "model", student.status());
  models.student = *std::move(student);
  Result<std::unique_ptr<GradientPath>> path =
      GradientPath::Create(gradients_comm, math, *models.student, bucket_pool, grad_pool);
  if (!path.ok()) Fail(rank, "gradient buckets", path.status());
  models.path = *std::move(path);
  return models;
}

struct ActivationTags {
  TagId training = kUntagged;
  TagId eval = kUntagged;
};

ActivationTags CreateTags(CachingPool& act_pool, int rank) {
  Result<TagId> act_tag = act_pool.tag("activations");
  Result<TagId> eval_tag = act_pool.tag("eval");
  if (!act_tag.ok() || !eval_tag.ok())
    Fail(rank, "tags", act_tag.ok() ? eval_tag.status() : act_tag.status());
  return {*act_tag, *eval_tag};
}

// Rank 0: the run's set-up and which device group trains which model.
void PrintPlacement(const TrainOptions& o, const Placement& placement, const TensorMath& math, int world) {
  const char* coordinator = std::getenv("MEMCOORD_COORDINATOR");
  std::printf("memcoord-train: %d ranks | backend %s (%s, %s per rank) | math: %s | coordinator: %s\n", world,
              placement.device.kind.c_str(), placement.device.name.c_str(),
              FormatBytes(placement.share_bytes).c_str(), math.name(),
              coordinator && *coordinator ? coordinator : "none (standalone)");
  const GroupPlan& plan = placement.plan;
  for (std::size_t m = 0; m < o.models.size(); ++m) {
    const std::size_t g = static_cast<std::size_t>(plan.group_of_model[m]);
    const std::vector<int>& ranks = plan.ranks_of_group[g];
    const std::string where = ranks.size() == 1 ? fmt::format("rank {}", ranks.front())
                                                : fmt::format("ranks {}-{}", ranks.front(), ranks.back());
    std::printf("%s\n",
                fmt::format("placement: model {} ({} x {} hidden, {} params, {} per replica) -> device "
                            "group {} = {} ({} each)",
                            o.models[m].name, o.models[m].shape.depth, o.models[m].shape.hidden,
                            o.models[m].shape.parameter_count(), FormatBytes(plan.model_bytes[m]), g, where,
                            FormatBytes(plan.group_capacity_bytes[g]))
                    .c_str());
  }
  std::printf("placement planned in %.2f ms by the planner's whole-model packer\n", plan.planning_ms);
  std::fflush(stdout);
}

// How each group's gradients travel (the groups may differ): gathered so rank 0 prints them in order.
void PrintGradientRoutes(const ModelConfig& config, const RankComms& comms, const GradientPath& path,
                         const Worker& worker, int rank, int world) {
  constexpr std::size_t kLine = 256;
  std::string line;
  if (comms.group->rank() == 0) {
    line = fmt::format("model {}: {}, {} gradient buckets{}", config.name, comms.why, path.buckets(),
                       path.staged() ? ", device gradients staged through host memory" : "");
  }
  line.resize(kLine, '\0');
  std::vector<char> lines(kLine * static_cast<std::size_t>(world));
  if (Status s = comms.world->allgather(line.data(), lines.data(), kLine / 4, DataType::kInt32); !s.ok())
    FailStep(worker, rank, "setup gather", s);
  if (rank != 0) return;
  for (int r = 0; r < world; ++r) {
    const char* text = lines.data() + kLine * static_cast<std::size_t>(r);
    if (*text != '\0') std::printf("%.*s\n", static_cast<int>(strnlen(text, kLine)), text);
  }
  std::fflush(stdout);
}

// With a coordinator, start training only once every rank is attached, so commands reach all of them.
void WaitForAttach(const TrainOptions& o, const Worker& worker, Communicator& world_comm, int rank,
                   int world) {
  const char* coordinator = std::getenv("MEMCOORD_COORDINATOR");
  if (coordinator == nullptr || *coordinator == '\0' || o.attach_timeout_s <= 0) return;
  const auto deadline = Clock::now() + std::chrono::seconds(o.attach_timeout_s);
  while (!worker.attached() && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::int64_t attached = worker.attached() ? 1 : 0;
  if (Status s = world_comm.allreduce(&attached, &attached, 1, DataType::kInt64, ReduceOp::kSum); !s.ok())
    FailStep(worker, rank, "attach check", s);
  if (rank == 0) {
    std::printf("coordinator %s: %lld/%d ranks attached%s\n", coordinator, static_cast<long long>(attached),
                world, attached == world ? "" : " (the others keep trying in the background)");
    std::fflush(stdout);
  }
}

// Adds to `rec` the coordinator trims applied at this step end that were not seen before.
void RecordNewTrims(const Worker& worker, std::vector<std::uint64_t>& seen_trims, StepRecord& rec) {
  for (const AppliedCommand& c : worker.applied_commands()) {
    if (c.kind != AppliedCommand::Kind::kTrim) continue;
    if (std::find(seen_trims.begin(), seen_trims.end(), c.command_id) != seen_trims.end()) continue;
    seen_trims.push_back(c.command_id);
    rec.trim_step = c.step;
    rec.released += c.released_bytes;
  }
}

// What one training step needs besides its number; all borrowed.
struct StepParts {
  const TrainOptions& o;
  int model;
  Worker& worker;
  TensorMath& math;
  Replica& replica;
  const std::vector<CachingPool*>& pools;
  int rank;
};

// One step: train (and evaluate when due), pace, end the step at the worker's safe point (where trims
// land), and return the record the reporter gathers.
StepRecord RunStep(const StepParts& p, std::int64_t step, std::vector<std::uint64_t>& seen_trims) {
  const TrainOptions& o = p.o;
  const auto start = Clock::now();
  p.worker.step_begin();
  StepRecord rec;
  rec.model = p.model;
  rec.step = step;
  rec.batch = BatchFor(o, step);
  Result<double> loss = p.replica.TrainStep(step, rec.batch);
  if (!loss.ok()) FailStep(p.worker, p.rank, "training", loss.status());
  rec.loss = *loss;
  if ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps) {
    Result<double> eval = p.replica.Evaluate(step, o.eval_batch);
    if (!eval.ok()) FailStep(p.worker, p.rank, "evaluation", eval.status());
    rec.eval_loss = *eval;
  }
  if (Status s = p.math.sync(); !s.ok()) Fail(p.rank, "sync", s);
  const auto pace = start + std::chrono::milliseconds(o.min_step_ms);
  if (Clock::now() < pace) std::this_thread::sleep_until(pace);

  rec.reserved_before = Reserved(p.pools, &PoolStats::reserved_bytes);
  if (Status s = p.worker.step_end(); !s.ok()) Fail(p.rank, "step_end", s);
  rec.reserved_after = Reserved(p.pools, &PoolStats::reserved_bytes);
  RecordNewTrims(p.worker, seen_trims, rec);
  rec.step_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return rec;
}

void TrainSteps(const StepParts& parts, StepReporter& reporter) {
  std::vector<std::uint64_t> seen_trims;
  for (std::int64_t step = 1; step <= parts.o.steps; ++step) {
    const StepRecord rec = RunStep(parts, step, seen_trims);
    if (Status s = reporter.record(rec); !s.ok()) FailStep(parts.worker, parts.rank, "progress", s);
  }
}

// The final report over every rank, then the worker's shutdown; the exit code says whether the run held.
int Finish(const StepParts& parts, const Mlp& student, StepReporter& reporter) {
  const TrainOptions& o = parts.o;
  const int rank = parts.rank;
  RankSummary summary;
  summary.model = parts.model;
  Result<std::uint64_t> checksum = student.checksum(parts.math);
  if (!checksum.ok()) Fail(rank, "checksum", checksum.status());
  summary.checksum = *checksum;
  summary.peak_reserved = Reserved(parts.pools, &PoolStats::peak_reserved_bytes);
  summary.reserved = Reserved(parts.pools, &PoolStats::reserved_bytes);
  summary.peak_allocated = Reserved(parts.pools, &PoolStats::peak_allocated_bytes);
  summary.device = parts.worker.device();
  Result<Verdict> verdict = reporter.finish(summary);
  if (!verdict.ok()) FailStep(parts.worker, rank, "report", verdict.status());
  parts.worker.shutdown();
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

// Set-up (worker, math, pools, placement, communicators, models), the training steps, the report. Locals
// are declared in dependency order, so they are destroyed users first (the worker last).
int Run(const TrainOptions& o, int rank) {
  std::unique_ptr<Worker> worker = StartWorker(o, rank);
  const int world = worker->topology().world_size;
  std::unique_ptr<TensorMath> math = MakeMath(worker->device(), rank);
  const RankPools pools = CreatePools(*worker, rank);
  const Placement placement = PlanPlacement(o, *worker, rank);
  const int model = placement.plan.model_of_rank(rank);
  const ModelConfig& config = o.models[static_cast<std::size_t>(model)];
  RankComms comms = ConnectGroup(o, placement.plan, model, *worker, rank);
  BucketMemory buckets = BucketMemoryFor(*math, *comms.gradients, config, *pools.gradients, rank);
  RankModels models =
      CreateModels(o, model, *math, *pools.params, *comms.gradients, *buckets.pool, *pools.gradients, rank);
  const ActivationTags tags = CreateTags(*pools.activations, rank);

  if (rank == 0) PrintPlacement(o, placement, *math, world);
  PrintGradientRoutes(config, comms, *models.path, *worker, rank, world);
  WaitForAttach(o, *worker, *comms.world, rank, world);

  Replica replica(ReplicaParts{*math, *models.teacher, *models.student, *models.path, *comms.group,
                               *pools.activations, tags.training, tags.eval, o.seed,
                               static_cast<std::uint64_t>(model), o.lr, o.momentum});
  StepReporter reporter(*comms.world, o.models, placement.plan, o.steps, o.print_every);
  const StepParts parts{o, model, *worker, *math, replica, pools.all, rank};
  TrainSteps(parts, reporter);
  return Finish(parts, *models.student, reporter);
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
