// BucketMemory: the memory resource GradientBucketer takes its buckets from (a few large blocks, allocated
// at creation and returned at destruction). Kept this small so collectives/ needs no allocator: the worker's
// CachingPool is adapted to it by PoolBucketMemory (worker/pool_bucket_memory.h), a test can pass anything.
//
// Contract. allocate returns `bytes` (> 0) of memory the communicator accepts (device memory for NCCL, host
// memory for MPI), for use on `stream` (where gradients are written), or an error (RESOURCE_EXHAUSTED when
// out of memory). use_on(ptr, stream) says the block is also used by work on `stream` (the communicator's):
// a stream-ordered resource must not hand it out again before that work is done. deallocate returns a block
// from allocate exactly once. Thread safety: whatever the implementation gives; the bucketer calls it from
// one thread. Ownership: the bucketer never owns the resource, which must outlive it.
#pragma once

#include <cstddef>

#include "collectives/stream.h"
#include "common/result.h"

namespace memcoord {

class BucketMemory {
 public:
  BucketMemory() = default;
  BucketMemory(const BucketMemory&) = delete;
  BucketMemory& operator=(const BucketMemory&) = delete;
  virtual ~BucketMemory() = default;

  virtual Result<void*> allocate(std::size_t bytes, CommStream stream) = 0;
  virtual Status use_on(void* ptr, CommStream stream) = 0;
  virtual Status deallocate(void* ptr) = 0;
};

}  // namespace memcoord
