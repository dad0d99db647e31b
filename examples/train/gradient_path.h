// GradientPath: where backward writes each parameter's gradient and how gradients get averaged over the
// group. Directly: backward writes into the GradientBucketer's bucket views and each bucket's allreduce
// starts as soon as its last gradient is marked ready (host math over MPI, or device math over NCCL).
// Staged: device math with an MPI communicator (ranks sharing a GPU): backward writes device scratch, each
// gradient is copied into the host bucket view when ready, and the averaged buckets are copied back after
// finish(). gradient(p) is the averaged gradient (in the math's memory) after finish().
//
// Thread safety: one thread at a time. Ownership: does not own the communicator, math or pools, which must
// outlive it. Errors: the bucketer's, the pools' and the math's, passed through.
#pragma once

#include <memory>
#include <vector>

#include "collectives/gradient_bucketer.h"
#include "examples/train/mlp.h"
#include "worker/pool_bucket_memory.h"

namespace memcoord::train {

class GradientPath {
 public:
  // `bucket_pool` must hold memory the communicator accepts (device memory for NCCL, host memory for MPI);
  // `scratch_pool` holds the device scratch when staging.
  static Result<std::unique_ptr<GradientPath>> Create(Communicator& comm, TensorMath& math, const Mlp& model,
                                                      CachingPool& bucket_pool, CachingPool& scratch_pool);
  GradientTarget target();
  Status finish();
  float* gradient(std::size_t p) const;
  bool staged() const { return !scratch_.empty(); }
  std::size_t buckets() const { return bucketer_->buckets().size(); }

 private:
  GradientPath(TensorMath& math, std::unique_ptr<PoolBucketMemory> memory,
               std::unique_ptr<GradientBucketer> bucketer)
      : math_(math), memory_(std::move(memory)), bucketer_(std::move(bucketer)) {}
  float* view(std::size_t p) const;

  TensorMath& math_;
  std::unique_ptr<PoolBucketMemory> memory_;  // bucket_pool as the bucketer's BucketMemory; outlives it
  std::unique_ptr<GradientBucketer> bucketer_;
  std::vector<PoolBuffer> scratch_;  // per parameter, when staged
};

}  // namespace memcoord::train
