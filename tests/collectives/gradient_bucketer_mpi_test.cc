// GradientBucketer under real mpirun over a host CachingPool: bucket layout, views into buckets, results
// equal to reducing every parameter on its own, ranks finishing parameters in different orders, bad use.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "allocator/host_backend.h"
#include "collectives/gradient_bucketer.h"
#include "collectives/mpi_communicator.h"
#include "typed_values.h"
#include "worker/pool_bucket_memory.h"

namespace memcoord {
namespace {

using namespace memcoord::testing;  // NOLINT

std::unique_ptr<MpiCommunicator> World() {
  auto comm = MpiCommunicator::Create(MPI_COMM_WORLD, {std::chrono::seconds(20), true});
  EXPECT_TRUE(comm.ok()) << comm.status().ToString();
  return comm.ok() ? std::move(*comm) : nullptr;
}

// A small model: odd sizes, a zero-size parameter, a type change in the middle, one parameter over the cap.
std::vector<ParameterSpec> Model() {
  return {{1000, DataType::kFloat32}, {7, DataType::kFloat32},    {0, DataType::kFloat32},
          {3001, DataType::kFloat32}, {129, DataType::kBFloat16}, {64, DataType::kBFloat16},
          {5000, DataType::kFloat32}, {33, DataType::kFloat64},   {250, DataType::kFloat32},
          {17, DataType::kFloat32},   {300, DataType::kFloat16},  {11, DataType::kInt64}};
}

BucketerOptions SmallBuckets() {
  BucketerOptions options;
  options.first_bucket_cap_bytes = 1024;
  options.bucket_cap_bytes = 8192;
  return options;
}

class GradientBucketerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    comm_ = World();
    ASSERT_NE(comm_, nullptr);
    pool_ = std::make_unique<CachingPool>(backend_, PoolOptions{});
    auto memory = PoolBucketMemory::Create(*pool_);
    ASSERT_TRUE(memory.ok()) << memory.status().ToString();
    memory_ = std::move(*memory);
  }
  HostBackend backend_{std::uint64_t{1} << 30};
  std::unique_ptr<MpiCommunicator> comm_;
  std::unique_ptr<CachingPool> pool_;
  std::unique_ptr<PoolBucketMemory> memory_;  // over pool_
};

TEST_F(GradientBucketerTest, PlansBucketsInReverseOrderWithCapsAndOneTypeEach) {
  const auto model = Model();
  auto bucketer = GradientBucketer::Create(*comm_, *memory_, model, SmallBuckets());
  ASSERT_TRUE(bucketer.ok()) << bucketer.status().ToString();
  const auto& buckets = (*bucketer)->buckets();
  ASSERT_FALSE(buckets.empty());
  // Bucket 0 starts with the last parameter; parameters appear exactly once, in reverse order overall.
  std::vector<std::size_t> order;
  for (const BucketInfo& b : buckets) order.insert(order.end(), b.parameters.begin(), b.parameters.end());
  std::vector<std::size_t> reverse(model.size());
  std::iota(reverse.rbegin(), reverse.rend(), 0);
  EXPECT_EQ(order, reverse);
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    const std::size_t cap = b == 0 ? 1024 : 8192;
    std::size_t payload = 0;
    for (std::size_t p : buckets[b].parameters) {
      EXPECT_EQ(model[p].type, buckets[b].type) << "bucket " << b << " mixes types";
      payload += model[p].count * SizeOf(model[p].type);
    }
    if (buckets[b].parameters.size() > 1) {
      EXPECT_LE(buckets[b].bytes, cap) << "bucket " << b;
    }
    EXPECT_GE(buckets[b].bytes, payload);
  }
  // Parameter 6 (20000 bytes) is over the cap: a bucket of its own.
  Result<std::size_t> own = (*bucketer)->bucket_of(6);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  EXPECT_EQ(buckets[*own].parameters.size(), 1u);
  // Views lie inside their bucket, 16-byte aligned, without overlap; the pool accounts them as "gradients".
  std::uint64_t bucket_bytes = 0;
  for (const BucketInfo& b : buckets) bucket_bytes += b.bytes;
  bool tagged = false;
  for (const TagUsage& usage : pool_->tag_usage()) {
    if (usage.tag == "gradients") {
      tagged = true;
      EXPECT_GE(usage.live_bytes, bucket_bytes);
      EXPECT_EQ(usage.live_blocks, buckets.size());
    }
  }
  EXPECT_TRUE(tagged);
  for (std::size_t p = 0; p < model.size(); ++p) {
    auto view = (*bucketer)->gradient(p);
    ASSERT_TRUE(view.ok());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*view) % 16, 0u);
  }
}

TEST_F(GradientBucketerTest, DefaultCapsAre25MiBAnd1MiBFirst) {
  // 40 parameters of 1 MiB (fp32): bucket 0 holds one, then buckets of up to 25 MiB.
  std::vector<ParameterSpec> model(40, ParameterSpec{1 << 18, DataType::kFloat32});
  auto bucketer = GradientBucketer::Create(*comm_, *memory_, model);
  ASSERT_TRUE(bucketer.ok()) << bucketer.status().ToString();
  const auto& buckets = (*bucketer)->buckets();
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[0].bytes, std::size_t{1} << 20);
  EXPECT_EQ(buckets[1].bytes, std::size_t{25} << 20);
  EXPECT_EQ(buckets[2].bytes, std::size_t{14} << 20);
}

// Every step: fill gradients in place, mark ready in a per-rank shuffled order, finish; the result must equal
// an unbucketed allreduce(avg) of each parameter on its own and the serial reference.
TEST_F(GradientBucketerTest, EqualsUnbucketedReductionWhateverTheReadyOrder) {
  const auto model = Model();
  auto created = GradientBucketer::Create(*comm_, *memory_, model, SmallBuckets());
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  GradientBucketer& bucketer = **created;
  std::mt19937 rng(static_cast<unsigned>(comm_->rank()) * 7919u + 1u);
  for (int step = 0; step < 3; ++step) {
    std::vector<Bytes> unbucketed;
    for (std::size_t p = 0; p < model.size(); ++p) {
      const Bytes data =
          RankData(model[p].type, comm_->rank(), model[p].count, step * 31 + static_cast<int>(p));
      auto view = bucketer.gradient(p);
      ASSERT_TRUE(view.ok());
      if (model[p].count > 0) std::memcpy(*view, data.data(), model[p].count * SizeOf(model[p].type));
      unbucketed.push_back(data);
    }
    std::vector<std::size_t> order(model.size());
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t p : order) {
      ASSERT_TRUE(bucketer.mark_ready(p).ok());
    }
    ASSERT_TRUE(bucketer.finish().ok());
    for (std::size_t p = 0; p < model.size(); ++p) {
      const std::size_t bytes = model[p].count * SizeOf(model[p].type);
      ASSERT_TRUE(comm_
                      ->allreduce(unbucketed[p].data(), unbucketed[p].data(), model[p].count, model[p].type,
                                  ReduceOp::kAvg)
                      .ok());
      const Bytes reference = ReducedReference(model[p].type, ReduceOp::kAvg, comm_->size(), model[p].count,
                                               step * 31 + static_cast<int>(p));
      Bytes got(std::max<std::size_t>(1, bytes));
      if (bytes > 0) std::memcpy(got.data(), *bucketer.gradient(p), bytes);
      EXPECT_TRUE(SameBytes(got, unbucketed[p], bytes)) << "step " << step << " parameter " << p;
      EXPECT_TRUE(SameBytes(got, reference, bytes)) << "step " << step << " parameter " << p;
    }
  }
}

TEST_F(GradientBucketerTest, BadUseIsNamed) {
  const auto model = Model();
  EXPECT_EQ(GradientBucketer::Create(*comm_, *memory_, {}).status().code(), StatusCode::kInvalidArgument);
  BucketerOptions odd = SmallBuckets();
  odd.alignment_bytes = 12;
  EXPECT_EQ(GradientBucketer::Create(*comm_, *memory_, model, odd).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(GradientBucketer::Create(*comm_, *memory_, {{4, static_cast<DataType>(9)}}).status().code(),
            StatusCode::kInvalidArgument);
  // Sizes past SIZE_MAX wrapped to buckets of a few bytes that gradient(p) then wrote past.
  for (std::size_t count : {std::size_t{1} << 62 | 4, SIZE_MAX}) {
    Result<std::unique_ptr<GradientBucketer>> huge =
        GradientBucketer::Create(*comm_, *memory_, {{4, DataType::kFloat32}, {count, DataType::kFloat32}});
    ASSERT_EQ(huge.status().code(), StatusCode::kInvalidArgument) << count;
    EXPECT_NE(huge.status().message().find("parameter 1's gradients do not fit"), std::string::npos)
        << huge.status().message();
  }
  // A rank that leaves a parameter unready issues fewer collectives than its peers: the rest would pair
  // with the wrong buckets. Here on a communicator of its own, which finish() aborts.
  auto sub = comm_->split(0, comm_->rank());
  ASSERT_TRUE(sub.ok());
  auto created = GradientBucketer::Create(**sub, *memory_, model, SmallBuckets());
  ASSERT_TRUE(created.ok());
  GradientBucketer& bucketer = **created;
  EXPECT_EQ(bucketer.bucket_of(model.size()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bucketer.gradient(model.size()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bucketer.mark_ready(99).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(bucketer.mark_ready(11).ok());
  Status twice = bucketer.mark_ready(11);
  EXPECT_EQ(twice.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(twice.message().find("already marked ready"), std::string::npos) << twice.message();
  // Every rank forgets parameter 3: finish names it; the buckets that did start are still completed.
  for (std::size_t p = 0; p < model.size(); ++p) {
    if (p == 3 || p == 11) continue;
    ASSERT_TRUE(bucketer.mark_ready(p).ok());
  }
  Status finished = bucketer.finish();
  EXPECT_EQ(finished.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(finished.message().find("1 parameter(s) were never marked ready"), std::string::npos)
      << finished.message();
  EXPECT_NE(finished.message().find("parameter 3"), std::string::npos) << finished.message();
  EXPECT_NE(finished.message().find("the communicator was aborted"), std::string::npos) << finished.message();
  EXPECT_EQ((*sub)->abort_status().code(), StatusCode::kAborted);
  // No later step runs on collectives out of step with the peers'.
  EXPECT_EQ(bucketer.mark_ready(0).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bucketer.finish().code(), StatusCode::kFailedPrecondition);
}

TEST_F(GradientBucketerTest, AbortedCommunicatorFailsTheStep) {
  auto sub = comm_->split(0, comm_->rank());
  ASSERT_TRUE(sub.ok());
  auto created = GradientBucketer::Create(**sub, *memory_, Model(), SmallBuckets());
  ASSERT_TRUE(created.ok());
  (*sub)->abort("worker told to stop");
  // Bucket 0 holds parameter 11 alone (the next one has another type): marking it starts the bucket.
  ASSERT_EQ((*created)->buckets()[0].parameters, std::vector<std::size_t>{11});
  Status s = (*created)->mark_ready(11);
  EXPECT_EQ(s.code(), StatusCode::kAborted) << s.ToString();
  EXPECT_NE(s.message().find("worker told to stop"), std::string::npos) << s.message();
}

// verify_arguments (on in World()) checks the layout once at creation: a rank with another model is refused
// on every rank, by name, before any gradient moves.
TEST_F(GradientBucketerTest, LayoutThatDiffersAcrossRanksIsRefusedAtCreationOnEveryRank) {
  auto model = Model();
  if (comm_->rank() == 1) model.push_back({5, DataType::kFloat32});
  auto extra = GradientBucketer::Create(*comm_, *memory_, model, SmallBuckets());
  ASSERT_FALSE(extra.ok());
  EXPECT_EQ(extra.status().code(), StatusCode::kInvalidArgument) << extra.status().ToString();
  EXPECT_NE(extra.status().message().find(
                "bucket layout check: ranks disagree on the number of parameters (between "
                "12 and 13"),
            std::string::npos)
      << extra.status().message();
  model = Model();
  if (comm_->rank() == 1) model[4].type = model[5].type = DataType::kFloat16;  // same sizes and buckets
  auto retyped = GradientBucketer::Create(*comm_, *memory_, model, SmallBuckets());
  ASSERT_FALSE(retyped.ok());
  EXPECT_NE(retyped.status().message().find("fingerprint of parameter counts, types and bucket caps"),
            std::string::npos)
      << retyped.status().message();
  EXPECT_TRUE(comm_->barrier().ok());  // the communicator stayed in step
}

// Once created, a bucket launch does no host-side wait for the other ranks: rank 0 marks every gradient ready
// (which launches every bucket) while the other ranks are still 500 ms away from theirs, and its marking
// returns at once. With verify_every_launch (one cross-rank check per launch, the old default) the same
// marking waits for the slowest rank, which shows the test sees a host wait when there is one. Wall clock;
// bounds generous for a loaded 2-core machine.
TEST_F(GradientBucketerTest, SteadyStateLaunchesDoNoHostSideWait) {
  const auto model = Model();
  for (bool every_launch : {false, true}) {
    SCOPED_TRACE(every_launch ? "verify_every_launch" : "layout checked once");
    BucketerOptions options = SmallBuckets();
    options.verify_every_launch = every_launch;
    auto created = GradientBucketer::Create(*comm_, *memory_, model, options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    GradientBucketer& bucketer = **created;
    ASSERT_GE(bucketer.buckets().size(), 3u);
    for (int step = 0; step < 2; ++step) {
      ASSERT_TRUE(comm_->barrier().ok());
      if (comm_->rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(step == 1 ? 500 : 0));
      const auto start = std::chrono::steady_clock::now();
      for (std::size_t p = model.size(); p-- > 0;) ASSERT_TRUE(bucketer.mark_ready(p).ok());
      const auto marking = std::chrono::steady_clock::now() - start;
      ASSERT_TRUE(bucketer.finish().ok());
      if (comm_->rank() != 0 || step == 0) continue;  // step 0 is the warm-up
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(marking).count();
      std::printf("rank 0: launching %zu buckets took %lld ms (%s)\n", bucketer.buckets().size(),
                  static_cast<long long>(ms), every_launch ? "verify_every_launch" : "layout checked once");
      if (every_launch) {
        EXPECT_GE(ms, 300) << "a per-launch check waits for the ranks still 500 ms away";
      } else {
        EXPECT_LT(ms, 250) << "a launch waited on the host for the other ranks";
      }
    }
  }
}

// A BucketMemory that is no pool at all (malloc), recording what the bucketer does with it.
class RecordingMemory final : public BucketMemory {
 public:
  ~RecordingMemory() override {
    for (void* p : live) std::free(p);
  }
  Result<void*> allocate(std::size_t bytes, CommStream) override {
    void* p = std::malloc(bytes);
    if (p == nullptr) return ResourceExhausted("malloc");
    live.insert(p);
    ++allocations;
    return p;
  }
  Status use_on(void*, CommStream) override { return Status::Ok(); }
  Status deallocate(void* p) override {
    if (live.erase(p) == 0) return InvalidArgument("not allocated here");
    std::free(p);
    ++deallocations;
    return Status::Ok();
  }
  std::set<void*> live;
  int allocations = 0;
  int deallocations = 0;
};

// The bucketer needs nothing but BucketMemory (collectives/ does not depend on the allocator): each non-empty
// bucket is allocated once, the averages are right, and every bucket comes back once at destruction.
TEST_F(GradientBucketerTest, AnyBucketMemoryServesAndGetsEveryBucketBack) {
  RecordingMemory memory;
  const auto model = Model();
  {
    auto created = GradientBucketer::Create(*comm_, memory, model, SmallBuckets());
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    GradientBucketer& bucketer = **created;
    const auto non_empty = std::count_if(bucketer.buckets().begin(), bucketer.buckets().end(),
                                         [](const BucketInfo& b) { return b.bytes > 0; });
    EXPECT_EQ(memory.allocations, non_empty);
    const int n = comm_->size();
    for (std::size_t p = 0; p < model.size(); ++p) {
      const Bytes mine = RankData(model[p].type, comm_->rank(), model[p].count, static_cast<int>(p));
      if (model[p].count > 0) std::memcpy(*bucketer.gradient(p), mine.data(), mine.size());
    }
    for (std::size_t p = model.size(); p-- > 0;) ASSERT_TRUE(bucketer.mark_ready(p).ok());
    ASSERT_TRUE(bucketer.finish().ok());
    for (std::size_t p = 0; p < model.size(); ++p) {
      const Bytes want =
          ReducedReference(model[p].type, ReduceOp::kAvg, n, model[p].count, static_cast<int>(p));
      Bytes got(want.size());
      if (model[p].count > 0) std::memcpy(got.data(), *bucketer.gradient(p), got.size());
      EXPECT_TRUE(SameBytes(got, want, got.size())) << "parameter " << p;
    }
  }
  EXPECT_EQ(memory.deallocations, memory.allocations);
  EXPECT_TRUE(memory.live.empty());
}

}  // namespace
}  // namespace memcoord
