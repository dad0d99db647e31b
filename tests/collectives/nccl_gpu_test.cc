// The NCCL communicator with one rank per process on real device buffers (label gpu; on a machine without a
// GPU the creation tests check the clean UNAVAILABLE and the rest skip). Two ranks on one GPU must be refused
// by name before NCCL sees them. Also the GradientBucketer over a pool on a cuda backend.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "allocator/caching_pool.h"
#include "allocator/cuda/cuda_backends.h"
#include "bench/collectives/overlap_kernel.h"
#include "collectives/gradient_bucketer.h"
#include "collectives/key_value_bootstrap.h"
#include "collectives/nccl_communicator.h"
#include "typed_values.h"
#include "worker/pool_bucket_memory.h"

namespace memcoord {
namespace {

using namespace memcoord::testing;  // NOLINT
using std::chrono::milliseconds;

bool HaveGpu() {
  int count = 0;
  const bool ok = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  return ok;
}

Result<std::unique_ptr<NcclCommunicator>> SingleRank(bool verify = true) {
  InProcessKeyValueBootstrap store;
  auto rendezvous = MakeKeyValueRendezvous(store, "test", 0, 1);
  NcclCommunicatorOptions options;
  options.communicator = {std::chrono::seconds(30), verify};
  return NcclCommunicator::Create(*rendezvous, options);
}

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
  (void)cudaGetLastError();
  return count;
}

using Clock = std::chrono::steady_clock;

// Runs `blocked` (a call waiting on a peer that never comes) while another thread calls `abort` after 300 ms;
// returns the call's status and how long after the abort it returned (wall clock).
template <typename Blocked, typename Abort>
std::pair<Status, milliseconds> AbortWhileBlocked(Blocked blocked, Abort abort) {
  std::atomic<Clock::time_point> aborted_at{Clock::time_point::max()};
  std::thread coordinator([&] {
    std::this_thread::sleep_for(milliseconds(300));
    aborted_at = Clock::now();
    abort();
  });
  Status s = blocked();
  const auto returned = Clock::now();
  coordinator.join();
  return {s, std::chrono::duration_cast<milliseconds>(returned - aborted_at.load())};
}

// Rank 0 of a 2-rank group whose rank 1 never calls ncclCommInitRank: the GPU exchange reports a made-up
// second GPU and the unique id comes from rank 0 itself, so NCCL's init waits for rank 1 forever.
class MissingPeerRendezvous final : public NcclRendezvous {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Result<std::vector<std::string>> allgather(std::string_view mine, milliseconds) override {
    return std::vector<std::string>{std::string(mine), "00000000:FF:1F.0"};
  }
  Result<std::string> broadcast(std::string_view value, int, milliseconds) override {
    return std::string(value);
  }
};

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) {
    EXPECT_EQ(cudaMalloc(&data, std::max<std::size_t>(bytes, 1)), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(data); }
  void* data = nullptr;
};

TEST(NcclCommunicator, WithoutAGpuCreationIsUnavailableNotACrash) {
  if (HaveGpu()) GTEST_SKIP() << "this machine has a GPU";
  auto comm = SingleRank();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kUnavailable) << comm.status().ToString();
  EXPECT_NE(comm.status().message().find("rank 0 has no GPU it can use"), std::string::npos)
      << comm.status().message();
}

TEST(NcclCommunicator, TwoRanksOnOneGpuAreRefusedByName) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  InProcessKeyValueBootstrap store;
  Status results[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto rendezvous = MakeKeyValueRendezvous(store, "dup", r, 2);
      NcclCommunicatorOptions options;
      options.device = 0;
      options.communicator.timeout = std::chrono::seconds(10);
      results[r] = NcclCommunicator::Create(*rendezvous, options).status();
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : results) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_NE(s.message().find("ranks 0 and 1 both use the GPU"), std::string::npos) << s.message();
  }
}

TEST(NcclCommunicator, MissingPeerTimesOutInRendezvous) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  InProcessKeyValueBootstrap store;
  auto rendezvous = MakeKeyValueRendezvous(store, "alone", 0, 2);
  NcclCommunicatorOptions options;
  options.communicator.timeout = milliseconds(300);
  auto comm = NcclCommunicator::Create(*rendezvous, options);
  EXPECT_EQ(comm.status().code(), StatusCode::kDeadlineExceeded) << comm.status().ToString();
}

// Creation blocked in NCCL's nonblocking init on a peer that never arrives ends within 1 s of the abort.
TEST(NcclCommunicator, AbortEndsCreationBlockedOnAMissingPeerWithinOneSecond) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  MissingPeerRendezvous rendezvous;
  AbortState cancel;
  NcclCommunicatorOptions options;
  options.communicator.timeout = std::chrono::seconds(30);
  options.cancel_creation = &cancel;
  auto [s, after_abort] =
      AbortWhileBlocked([&] { return NcclCommunicator::Create(rendezvous, options).status(); },
                        [&] { cancel.abort("the coordinator aborted the group"); });
  std::printf("NCCL init blocked on a missing peer returned %lld ms after the abort\n",
              static_cast<long long>(after_abort.count()));
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("the coordinator aborted the group"), std::string::npos) << s.message();
  EXPECT_GE(after_abort.count(), 0) << "returned before the abort";
  EXPECT_LT(after_abort, milliseconds(1000));
}

// Two ranks on two GPUs (threads of this process); rank 1 never enters the allreduce, rank 0 blocks in it,
// and abort() of rank 0's communicator from a third thread ends the call within 1 s with the abort's reason.
// This is the case the comm mutex used to block: a nonblocking enqueue still connecting was polled under it.
TEST(NcclCommunicator, AbortEndsAnAllreduceBlockedOnAMissingPeerWithinOneSecond) {
  if (GpuCount() < 2) GTEST_SKIP() << "needs 2 GPUs (" << GpuCount() << " here)";
  InProcessKeyValueBootstrap store;
  std::unique_ptr<NcclCommunicator> comms[2];
  Status created[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      auto rendezvous = MakeKeyValueRendezvous(store, "abort", r, 2);
      NcclCommunicatorOptions options;
      options.device = r;
      options.communicator.timeout = std::chrono::seconds(30);
      auto comm = NcclCommunicator::Create(*rendezvous, options);
      created[r] = comm.status();
      if (comm.ok()) comms[r] = std::move(*comm);
    });
  }
  for (auto& t : ranks) t.join();
  ASSERT_TRUE(created[0].ok() && created[1].ok()) << created[0].ToString() << " / " << created[1].ToString();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  constexpr std::size_t kCount = 1 << 20;
  DeviceBuffer buffer(kCount * sizeof(float));
  auto [s, after_abort] = AbortWhileBlocked(
      [&] {
        return comms[0]->allreduce(buffer.data, buffer.data, kCount, DataType::kFloat32, ReduceOp::kSum);
      },
      [&] { comms[0]->abort("the coordinator aborted the group"); });
  std::printf("NCCL allreduce blocked on a missing peer returned %lld ms after abort()\n",
              static_cast<long long>(after_abort.count()));
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("the coordinator aborted the group"), std::string::npos) << s.message();
  EXPECT_GE(after_abort.count(), 0) << "returned before the abort";
  EXPECT_LT(after_abort, milliseconds(1000));
  comms[1]->abort("test over");  // its peer is gone: do not let its destructor wait to finalize
}

TEST(NcclCommunicator, EveryOperationAndTypeOnDeviceBuffers) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto comm = SingleRank();
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  for (DataType type : kAllTypes) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{65537}}) {
      const std::size_t bytes = count * SizeOf(type);
      const Bytes host = RankData(type, 0, count, 3);
      DeviceBuffer send(bytes), recv(bytes);
      ASSERT_EQ(cudaMemcpy(send.data, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
      for (ReduceOp op : kAllOps) {
        ASSERT_EQ(cudaMemset(recv.data, 0xEE, std::max<std::size_t>(bytes, 1)), cudaSuccess);
        // The memset (and the upload) ran on the legacy default stream; the communicator's stream is a
        // non-blocking one, so order it explicitly (the Communicator contract).
        ASSERT_TRUE((*comm)->order_after(kDefaultStream).ok());
        ASSERT_TRUE((*comm)->allreduce(send.data, recv.data, count, type, op).ok());
        Bytes got(host.size());
        ASSERT_EQ(cudaMemcpy(got.data(), recv.data, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        EXPECT_TRUE(SameBytes(got, ReducedReference(type, op, 1, count, 3), bytes))
            << DataTypeName(type) << " " << ReduceOpName(op) << " x " << count;
        ASSERT_TRUE((*comm)->reduce_scatter(send.data, recv.data, count, type, op).ok());
      }
      ASSERT_TRUE((*comm)->broadcast(send.data, count, type, 0).ok());
      ASSERT_TRUE((*comm)->allgather(send.data, recv.data, count, type).ok());
      Bytes got(host.size());
      ASSERT_EQ(cudaMemcpy(got.data(), recv.data, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_TRUE(SameBytes(got, host, bytes)) << "allgather " << DataTypeName(type);
    }
  }
  EXPECT_TRUE((*comm)->barrier().ok());
  auto sub = (*comm)->split(0, 0);
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_NE(*sub, nullptr);
  EXPECT_EQ((*sub)->size(), 1);
  EXPECT_TRUE((*sub)->barrier().ok());
  auto none = (*comm)->split(-1, 0);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(*none, nullptr);
}

TEST(NcclCommunicator, HostBuffersAndAbortAreClearErrors) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto comm = SingleRank();
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  std::vector<float> host(16, 1.0f);
  Status s = (*comm)->allreduce(host.data(), host.data(), 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
  (*comm)->abort("test abort");
  DeviceBuffer buffer(64);
  s = (*comm)->allreduce(buffer.data, buffer.data, 16, DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(s.code(), StatusCode::kAborted);
  EXPECT_NE(s.message().find("test abort"), std::string::npos) << s.message();
}

// Every call but Create, and the destructors of the communicator and of a pending collective, do their CUDA
// work on the communicator's GPU and leave the caller's current device as it was: a one-rank communicator on
// GPU 1, used and destroyed from a thread that has moved to GPU 0. (Before, ~NcclPendingCollective destroyed
// its event on whatever device was current, and every call left GPU 1 current.) Needs two GPUs.
TEST(NcclCommunicator, CallsAndDestructorsUseItsGpuAndRestoreTheCallersDevice) {
  if (GpuCount() < 2) GTEST_SKIP() << "needs two GPUs";
  const auto current = [] {
    int device = -1;
    EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
    return device;
  };
  InProcessKeyValueBootstrap store;
  auto rendezvous = MakeKeyValueRendezvous(store, "device", 0, 1);
  NcclCommunicatorOptions options;
  options.device = 1;
  options.communicator.timeout = std::chrono::seconds(30);
  auto created = NcclCommunicator::Create(*rendezvous, options);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<NcclCommunicator> comm = std::move(*created);
  ASSERT_EQ(current(), 1) << "Create leaves its device current";
  constexpr std::size_t kCount = 1024;
  auto buffer = std::make_unique<DeviceBuffer>(kCount * sizeof(float));  // on GPU 1
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);

  auto started =
      comm->start_allreduce(buffer->data, buffer->data, kCount, DataType::kFloat32, ReduceOp::kSum);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<PendingCollective> pending = std::move(*started);
  EXPECT_EQ(current(), 0) << "start_allreduce";
  EXPECT_TRUE(pending->poll().ok());
  EXPECT_EQ(current(), 0) << "poll";
  EXPECT_TRUE(pending->wait().ok());
  pending.reset();
  EXPECT_EQ(current(), 0) << "the pending collective's destructor";
  EXPECT_TRUE(comm->order_after(kDefaultCommStream).ok());  // GPU 1's default stream
  EXPECT_EQ(current(), 0) << "order_after";
  Status reduced = comm->allreduce(buffer->data, buffer->data, kCount, DataType::kFloat32, ReduceOp::kAvg);
  EXPECT_TRUE(reduced.ok()) << reduced.ToString();  // with the argument check (verify_arguments)
  EXPECT_EQ(current(), 0) << "allreduce";
  auto child = comm->split(0, 0);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(current(), 0) << "split";
  child->reset();
  EXPECT_EQ(current(), 0) << "the split communicator's destructor";
  comm.reset();
  EXPECT_EQ(current(), 0) << "the communicator's destructor";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  buffer.reset();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

TEST(NcclCommunicator, BucketerOverADevicePool) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto comm = SingleRank(false);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  auto backend = MakeCudaBackend("cuda", 0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  CachingPool pool(**backend, PoolOptions{});
  auto memory = PoolBucketMemory::Create(pool);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  std::vector<ParameterSpec> model = {{1000, DataType::kFloat32},
                                      {3001, DataType::kBFloat16},
                                      {1 << 20, DataType::kFloat32},
                                      {77, DataType::kFloat16}};
  BucketerOptions options;
  options.first_bucket_cap_bytes = 4096;
  options.bucket_cap_bytes = 1 << 20;
  auto bucketer = GradientBucketer::Create(**comm, **memory, model, options);
  ASSERT_TRUE(bucketer.ok()) << bucketer.status().ToString();
  for (std::size_t p = 0; p < model.size(); ++p) {
    const Bytes host = RankData(model[p].type, 0, model[p].count, static_cast<int>(p));
    ASSERT_EQ(cudaMemcpy(*(*bucketer)->gradient(p), host.data(), model[p].count * SizeOf(model[p].type),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  for (std::size_t p = model.size(); p-- > 0;) ASSERT_TRUE((*bucketer)->mark_ready(p).ok());
  ASSERT_TRUE((*bucketer)->finish().ok());
  ASSERT_EQ(cudaStreamSynchronize(reinterpret_cast<cudaStream_t>((*comm)->stream())), cudaSuccess);
  for (std::size_t p = 0; p < model.size(); ++p) {
    const std::size_t bytes = model[p].count * SizeOf(model[p].type);
    Bytes got(bytes);
    ASSERT_EQ(cudaMemcpy(got.data(), *(*bucketer)->gradient(p), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(SameBytes(
        got, ReducedReference(model[p].type, ReduceOp::kAvg, 1, model[p].count, static_cast<int>(p)), bytes))
        << "parameter " << p;
  }
}

// With verify_arguments on (the default), bucket launches do no host-side wait: while a 300 ms kernel is
// still computing gradients on the compute stream, marking every gradient ready (which launches every bucket)
// returns at once. With verify_every_launch (one cross-rank check per launch, the old default) the first
// launch waits on the host for that kernel, which shows the test sees such a wait. Wall clock, generous
// bounds.
TEST(NcclCommunicator, BucketLaunchesDoNotWaitForQueuedCompute) {
  if (!HaveGpu()) GTEST_SKIP() << "no GPU";
  auto comm = SingleRank(true);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  // The stream is made first so that it is destroyed last: the pool caches the buckets' blocks on it and
  // synchronizes it when it is destroyed (a stream must outlive the blocks a pool caches on it; destroying
  // it first made this test crash inside cudaStreamSynchronize).
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  const std::unique_ptr<CUstream_st, cudaError_t (*)(cudaStream_t)> compute_owner(compute, cudaStreamDestroy);
  auto backend = MakeCudaBackend("cuda", 0);
  ASSERT_TRUE(backend.ok()) << backend.status().ToString();
  CachingPool pool(**backend, PoolOptions{});
  auto memory = PoolBucketMemory::Create(pool);
  ASSERT_TRUE(memory.ok()) << memory.status().ToString();
  const std::vector<ParameterSpec> model(6, ParameterSpec{1 << 16, DataType::kFloat32});
  for (bool every_launch : {false, true}) {
    SCOPED_TRACE(every_launch ? "verify_every_launch" : "layout checked once");
    BucketerOptions options;
    options.first_bucket_cap_bytes = 1 << 18;
    options.bucket_cap_bytes = 1 << 19;
    options.compute_stream = reinterpret_cast<StreamId>(compute);
    options.verify_every_launch = every_launch;
    auto bucketer = GradientBucketer::Create(**comm, **memory, model, options);
    ASSERT_TRUE(bucketer.ok()) << bucketer.status().ToString();
    ASSERT_GE((*bucketer)->buckets().size(), 3u);
    for (int step = 0; step < 2; ++step) {
      // Backward: the last layer's kernel runs 300 ms (in step 1); the others are short.
      for (std::size_t p = model.size(); p-- > 0;) {
        const long long busy_ns = step == 1 && p + 1 == model.size() ? 300'000'000 : 0;
        ASSERT_EQ(bench::LaunchBusyWrite(static_cast<float*>(*(*bucketer)->gradient(p)), model[p].count, 1.0f,
                                         busy_ns, compute),
                  0);
      }
      const auto start = Clock::now();
      for (std::size_t p = model.size(); p-- > 0;) ASSERT_TRUE((*bucketer)->mark_ready(p).ok());
      const auto marking = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
      ASSERT_TRUE((*bucketer)->finish().ok());
      if (step == 0) continue;
      std::printf("launching %zu buckets behind a 300 ms kernel took %lld ms (%s)\n",
                  (*bucketer)->buckets().size(), static_cast<long long>(marking.count()),
                  every_launch ? "verify_every_launch" : "layout checked once");
      if (every_launch) {
        EXPECT_GE(marking, milliseconds(250)) << "a per-launch check waits for the queued kernel";
      } else {
        EXPECT_LT(marking, milliseconds(100)) << "a launch waited on the host for queued compute";
      }
    }
  }
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
}

}  // namespace
}  // namespace memcoord
