#include "examples/train/gradient_path.h"

namespace memcoord::train {

Result<std::unique_ptr<GradientPath>> GradientPath::Create(Communicator& comm, TensorMath& math,
                                                           const Mlp& model, CachingPool& bucket_pool,
                                                           CachingPool& scratch_pool) {
  BucketerOptions options;
  options.first_bucket_cap_bytes = std::size_t{64} << 10;  // small models: several buckets even so
  options.bucket_cap_bytes = std::size_t{1} << 20;
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<PoolBucketMemory> memory, PoolBucketMemory::Create(bucket_pool));
  MEMCOORD_ASSIGN_OR_RETURN(std::unique_ptr<GradientBucketer> bucketer,
                            GradientBucketer::Create(comm, *memory, model.parameter_specs(), options));
  std::unique_ptr<GradientPath> path(new GradientPath(math, std::move(memory), std::move(bucketer)));
  if (math.on_device() && !comm.device_buffers()) {
    MEMCOORD_ASSIGN_OR_RETURN(TagId tag, scratch_pool.tag("gradients"));
    for (std::size_t p = 0; p < model.parameter_count(); ++p) {
      MEMCOORD_ASSIGN_OR_RETURN(PoolBuffer b,
                                PoolBuffer::Make(scratch_pool, model.elements(p) * sizeof(float), tag));
      path->scratch_.push_back(std::move(b));
    }
  }
  return path;
}

float* GradientPath::view(std::size_t p) const {
  Result<void*> v = bucketer_->gradient(p);
  return v.ok() ? static_cast<float*>(*v) : nullptr;
}

GradientTarget GradientPath::target() {
  GradientTarget t;
  t.buffer = [this](std::size_t p) -> Result<float*> {
    if (staged()) return scratch_.at(p).f();
    MEMCOORD_ASSIGN_OR_RETURN(void* v, bucketer_->gradient(p));
    return static_cast<float*>(v);
  };
  t.ready = [this](std::size_t p) -> Status {
    if (staged()) {
      MEMCOORD_RETURN_IF_ERROR(math_.to_host(view(p), scratch_.at(p).get(), scratch_.at(p).bytes()));
    }
    return bucketer_->mark_ready(p);
  };
  return t;
}

Status GradientPath::finish() {
  MEMCOORD_RETURN_IF_ERROR(bucketer_->finish());
  for (std::size_t p = 0; p < scratch_.size(); ++p) {
    MEMCOORD_RETURN_IF_ERROR(math_.from_host(scratch_[p].get(), view(p), scratch_[p].bytes()));
  }
  return Status::Ok();
}

float* GradientPath::gradient(std::size_t p) const { return staged() ? scratch_.at(p).f() : view(p); }

}  // namespace memcoord::train
