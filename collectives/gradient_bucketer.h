// GradientBucketer: DDP-style gradient buckets. Parameters are registered in order (forward order: count and
// type each); gradients live directly inside a few large buckets allocated from a BucketMemory (the worker's
// CachingPool through PoolBucketMemory, tag "gradients"), so gradient(p) is a view into its bucket: there is
// no copy and no second gradient buffer. Backward produces gradients roughly in reverse registration order,
// so buckets are filled from the last parameter backwards, as PyTorch DDP does: bucket 0 holds the last
// parameters and is small (first_bucket_cap_bytes, 1 MiB by default) so the first allreduce starts early; the
// others are up to bucket_cap_bytes (25 MiB). A bucket holds one type only; a parameter larger than the cap
// gets a bucket of its own.
//
// Each step: write the gradients (through gradient(p)), call mark_ready(p) as each is done, then finish().
// When the last parameter of a bucket is marked ready its allreduce (avg) starts at once, without blocking,
// so communication overlaps the rest of backward. Buckets start strictly in bucket order on every rank (a
// full bucket waits for the earlier ones), so ranks that finish parameters in different orders still issue
// the same collectives in the same order. finish() waits for all buckets: the gradients then hold the average
// over ranks. mark_ready also polls the buckets in flight (that is what drives MPI's progress).
//
// Cross-rank checking. With the communicator's verify_arguments (the default), Create compares the bucket
// layout across ranks once (parameter count, total elements, bucket count and a fingerprint of every
// parameter's count and type and the caps: one small blocking collective), as PyTorch DDP checks model shapes
// at construction; a rank with another model gets INVALID_ARGUMENT on every rank, naming what differs. The
// layout never changes afterwards, so every step issues the same allreduces in the same order and bucket
// launches skip the per-call check (Communicator::start_allreduce_checked_once): a launch never waits on the
// host for the other ranks or for queued GPU work, and communication overlaps backward. verify_every_launch
// restores one check per launch (a host wait each; for debugging and for the overlap bench).
//
// Device buffers: with a device communicator (NCCL) the memory must be device memory; each bucket waits
// for work queued on options.compute_stream (Communicator::order_after) before its allreduce.
// Thread safety: one thread at a time (the backward thread). Ownership: does not own the communicator or
// memory, which must outlive it; owns its buckets (returned to the memory on destruction, after any
// collective in flight has finished or failed). Failure: Status at every call; a failed collective leaves the
// communicator aborted (see Communicator) and every later finish() returns that error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collectives/bucket_memory.h"
#include "collectives/communicator.h"

namespace memcoord {

struct ParameterSpec {
  std::size_t count = 0;  // elements (0 is allowed: an empty view)
  DataType type = DataType::kFloat32;
};

struct BucketerOptions {
  std::size_t bucket_cap_bytes = std::size_t{25} << 20;
  std::size_t first_bucket_cap_bytes = std::size_t{1} << 20;
  std::size_t alignment_bytes = 16;  // each gradient view starts at a multiple of this in its bucket
  CommStream compute_stream = kDefaultCommStream;  // where gradients are written (device communicators)
  bool verify_every_launch = false;  // per-launch cross-rank check (see above); off: layout once
};

struct BucketInfo {
  std::size_t bytes = 0;  // as allocated from the BucketMemory
  DataType type = DataType::kFloat32;
  std::vector<std::size_t> parameters;  // registration indices, in the order they sit in the bucket
};

class GradientBucketer {
 public:
  // Plans the buckets, checks the layout across ranks (collective when verify_arguments is on) and allocates
  // them. Errors: INVALID_ARGUMENT (no parameters, an invalid type, a zero cap, an alignment that is not a
  // power of two multiple of every element size; a layout that differs across ranks, named); the
  // communicator's errors from the check; the memory's errors (RESOURCE_EXHAUSTED).
  static Result<std::unique_ptr<GradientBucketer>> Create(Communicator& comm, BucketMemory& memory,
                                                          std::vector<ParameterSpec> parameters,
                                                          BucketerOptions options = {});
  ~GradientBucketer();
  GradientBucketer(const GradientBucketer&) = delete;
  GradientBucketer& operator=(const GradientBucketer&) = delete;

  std::size_t parameter_count() const { return slots_.size(); }
  const std::vector<BucketInfo>& buckets() const { return buckets_; }
  // Parameter indices below are registration indices; every call that takes one validates it (bad input from
  // the training script is an error, never a crash), as none of them is on a per-element path.

  // The bucket holding the parameter's gradient, as an index into buckets(). Errors: INVALID_ARGUMENT when
  // parameter >= parameter_count(), naming the index and the accepted range.
  Result<std::size_t> bucket_of(std::size_t parameter) const;

  // The parameter's gradient inside its bucket: count elements of its type, valid for the bucketer's
  // lifetime. Errors: INVALID_ARGUMENT as bucket_of.
  Result<void*> gradient(std::size_t parameter) const;

  // The parameter's gradient is written. Errors: INVALID_ARGUMENT as bucket_of;
  // FAILED_PRECONDITION when it was already marked this step; the communicator's error when a bucket cannot
  // start.
  Status mark_ready(std::size_t parameter);

  // Waits for every bucket; the gradients then hold the average over ranks, and the next step may begin.
  // Errors: FAILED_PRECONDITION naming parameters never marked ready (buckets already started are still
  // waited for); then this rank's collectives no longer pair with its peers', so the communicator is aborted
  // and every later call fails (not recoverable: restart the job). The communicator's DEADLINE_EXCEEDED /
  // ABORTED / backend errors.
  Status finish();

 private:
  struct Slot {
    std::size_t bucket = 0;
    std::size_t offset_bytes = 0;
    bool ready = false;
  };
  struct Bucket {
    void* data = nullptr;
    std::size_t elements = 0;  // allreduced elements, padding included
    std::size_t waiting = 0;   // parameters not yet ready this step
    std::unique_ptr<PendingCollective> in_flight;
    bool unsafe_to_free = false;  // its collective failed: the backend may still write it
  };

  GradientBucketer(Communicator& comm, BucketMemory& memory, BucketerOptions options);
  Status CheckLayoutAcrossRanks(const std::vector<ParameterSpec>& parameters);
  // OK when `parameter` is registered; else INVALID_ARGUMENT "<call>: parameter ... accepted: 0 to n-1".
  Status CheckParameter(std::string_view call, std::size_t parameter) const;
  Status LaunchReadyBuckets();
  Status PollInFlight();
  Status WaitAll();
  void ResetStep();

  Communicator& comm_;
  BucketMemory& memory_;
  const BucketerOptions options_;
  std::vector<Slot> slots_;
  std::vector<BucketInfo> buckets_;
  std::vector<Bucket> state_;
  std::size_t next_launch_ = 0;  // buckets [0, next_launch_) have started this step
  Status failed_;                // sticky once a collective failed
};

}  // namespace memcoord
