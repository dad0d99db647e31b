// PoolBucketMemory: a CachingPool seen as the GradientBucketer's BucketMemory, the adaptor on the side that
// builds bucketers (memcoord-train's GradientPath, the collectives tests and benches), so collectives/ never
// depends on the allocator. Every bucket is tagged (default "gradients") for the pool's per-tag statistics;
// use_on is the pool's record_stream. Header-only: a user links memcoord_allocator and memcoord_collectives,
// which it does anyway.
// Thread safety: as CachingPool. Ownership: does not own the pool, which must outlive it (and it must outlive
// every bucketer built on it).
#pragma once

#include <memory>
#include <string_view>

#include "allocator/caching_pool.h"
#include "collectives/bucket_memory.h"

namespace memcoord {

class PoolBucketMemory final : public BucketMemory {
 public:
  // Errors: the pool's, when the tag cannot be made.
  static Result<std::unique_ptr<PoolBucketMemory>> Create(CachingPool& pool,
                                                          std::string_view tag = "gradients") {
    Result<TagId> id = pool.tag(tag);
    if (!id.ok()) return id.status();
    return std::unique_ptr<PoolBucketMemory>(new PoolBucketMemory(pool, *id));
  }

  Result<void*> allocate(std::size_t bytes, CommStream stream) override {
    return pool_.allocate(bytes, static_cast<StreamId>(stream), tag_);
  }
  Status use_on(void* ptr, CommStream stream) override {
    return pool_.record_stream(ptr, static_cast<StreamId>(stream));
  }
  Status deallocate(void* ptr) override { return pool_.deallocate(ptr); }

 private:
  PoolBucketMemory(CachingPool& pool, TagId tag) : pool_(pool), tag_(tag) {}
  CachingPool& pool_;
  TagId tag_;
};

}  // namespace memcoord
