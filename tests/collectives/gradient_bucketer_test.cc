// GradientBucketer without MPI: a one-rank host communicator (every collective is the identity) and
// malloc'd buckets, for the checks that need no peers. Bad parameter indices are INVALID_ARGUMENT naming the
// index and the accepted range, from every call that takes one, and no exception escapes (bucket_of used to
// throw std::out_of_range from vector::at).
#include "collectives/gradient_bucketer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "collectives/bucket_memory.h"
#include "collectives/communicator.h"

namespace memcoord {
namespace {

// A finished collective: the one-rank result is already in place.
class DonePending final : public PendingCollective {
 public:
  explicit DonePending(std::string description) : description_(std::move(description)) {}
  const std::string& description() const override { return description_; }

 private:
  Result<bool> do_poll() override { return true; }
  Status do_wait() override { return Status::Ok(); }
  std::string description_;
};

// A group of one rank on host buffers: every collective leaves the data as it is (a copy when out of
// place), which is the right answer for one rank.
class OneRankCommunicator final : public Communicator {
 public:
  OneRankCommunicator() : Communicator(0, 1, CommunicatorOptions{}) {}
  std::string_view backend() const override { return "one-rank"; }
  bool device_buffers() const override { return false; }

 private:
  Result<std::unique_ptr<PendingCollective>> do_start_allreduce(const void* send, void* recv,
                                                                std::size_t count, DataType type,
                                                                ReduceOp) override {
    Copy(send, recv, count, type);
    return std::unique_ptr<PendingCollective>(std::make_unique<DonePending>("allreduce"));
  }
  Status do_broadcast(void*, std::size_t, DataType, int) override { return Status::Ok(); }
  Status do_allgather(const void* send, void* recv, std::size_t count, DataType type) override {
    Copy(send, recv, count, type);
    return Status::Ok();
  }
  Status do_reduce_scatter(const void* send, void* recv, std::size_t count, DataType type,
                           ReduceOp) override {
    Copy(send, recv, count, type);
    return Status::Ok();
  }
  Status do_barrier() override { return Status::Ok(); }
  Result<std::unique_ptr<Communicator>> do_split(int, int) override {
    return Unimplemented("OneRankCommunicator: split");
  }
  void do_abort() override {}
  Status do_max_allreduce_words(long long*, int, std::string_view) override { return Status::Ok(); }

  static void Copy(const void* send, void* recv, std::size_t count, DataType type) {
    if (send != recv && count > 0) std::memmove(recv, send, count * SizeOf(type));
  }
};

// Buckets from malloc; checks every block comes back once.
class MallocBucketMemory final : public BucketMemory {
 public:
  ~MallocBucketMemory() override { EXPECT_TRUE(live_.empty()) << live_.size() << " bucket(s) not returned"; }
  Result<void*> allocate(std::size_t bytes, CommStream) override {
    void* p = std::malloc(bytes);
    if (p == nullptr) return ResourceExhausted("malloc");
    live_.insert(p);
    return p;
  }
  Status use_on(void*, CommStream) override { return Status::Ok(); }
  Status deallocate(void* ptr) override {
    if (live_.erase(ptr) != 1) return InvalidArgument("not a live bucket");
    std::free(ptr);
    return Status::Ok();
  }

 private:
  std::set<void*> live_;
};

class GradientBucketerUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto created = GradientBucketer::Create(comm_, memory_,
                                            {{100, DataType::kFloat32},
                                             {7, DataType::kFloat32},
                                             {0, DataType::kFloat32},
                                             {33, DataType::kFloat64}});
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    bucketer_ = std::move(*created);
  }

  OneRankCommunicator comm_;
  MallocBucketMemory memory_;
  std::unique_ptr<GradientBucketer> bucketer_;  // declared last: destroyed before the memory it uses
};

// The message names the call, the index and the accepted range.
void ExpectBadIndex(const Status& status, const std::string& call, const std::string& index) {
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  const std::string& m = status.message();
  EXPECT_NE(m.find(call + ": parameter " + index + " is not registered"), std::string::npos) << m;
  EXPECT_NE(m.find("accepted: 0 to 3 (4 parameters)"), std::string::npos) << m;
}

TEST_F(GradientBucketerUnitTest, BucketOfEveryRegisteredParameterIsABucket) {
  ASSERT_EQ(bucketer_->parameter_count(), 4u);
  for (std::size_t p = 0; p < bucketer_->parameter_count(); ++p) {
    Result<std::size_t> bucket = bucketer_->bucket_of(p);
    ASSERT_TRUE(bucket.ok()) << bucket.status().ToString();
    ASSERT_LT(*bucket, bucketer_->buckets().size());
    const std::vector<std::size_t>& held = bucketer_->buckets()[*bucket].parameters;
    EXPECT_NE(std::find(held.begin(), held.end(), p), held.end()) << "parameter " << p;
  }
  // The fp64 parameter (last registered) is in bucket 0, the fp32 ones in another.
  EXPECT_EQ(*bucketer_->bucket_of(3), 0u);
  EXPECT_NE(*bucketer_->bucket_of(0), 0u);
}

TEST_F(GradientBucketerUnitTest, BadIndexIsInvalidArgumentNamingTheRangeNotAnException) {
  for (std::size_t bad : {std::size_t{4}, std::size_t{1000}, SIZE_MAX}) {
    const std::string index = std::to_string(bad);
    EXPECT_NO_THROW({
      Result<std::size_t> bucket = bucketer_->bucket_of(bad);
      ExpectBadIndex(bucket.status(), "bucket_of", index);
    }) << index;
    EXPECT_NO_THROW(ExpectBadIndex(bucketer_->gradient(bad).status(), "gradient", index)) << index;
    EXPECT_NO_THROW(ExpectBadIndex(bucketer_->mark_ready(bad), "mark_ready", index)) << index;
  }
  // Nothing changed: a full step still runs.
  for (std::size_t p = 4; p-- > 0;) ASSERT_TRUE(bucketer_->mark_ready(p).ok());
  EXPECT_TRUE(bucketer_->finish().ok());
}

}  // namespace
}  // namespace memcoord
