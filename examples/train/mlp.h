// Mlp: a small fully connected network (ReLU between layers, linear output) whose parameters and momentum
// live in one CachingPool; the student that memcoord-train trains and the fixed teacher that labels the
// synthetic data are both Mlps. Parameters are numbered in forward order, weight then bias per layer
// (W0, b0, W1, b1, ...), the order GradientBucketer registers them in; backward produces them last first.
//
// PoolBuffer is the RAII handle for one pool allocation (freed on destruction). TrainBatch/Evaluate
// allocate their activations from a pool for the duration of the call only, so activation memory returns to
// the pool's cache after every step (what a cluster trim later releases).
//
// Thread safety: one thread at a time. Ownership: an Mlp frees its buffers into the pool, which must outlive
// it. Errors: the pool's RESOURCE_EXHAUSTED and the math's errors, passed through.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "allocator/caching_pool.h"
#include "collectives/gradient_bucketer.h"
#include "examples/train/tensor_math.h"

namespace memcoord::train {

struct MlpShape {
  int in = 32;
  int hidden = 128;
  int depth = 2;  // hidden layers
  int out = 8;
  std::vector<int> widths() const;  // in, hidden x depth, out
  std::size_t parameter_count() const;
};

class PoolBuffer {
 public:
  PoolBuffer() = default;
  static Result<PoolBuffer> Make(CachingPool& pool, std::size_t bytes, TagId tag);
  PoolBuffer(PoolBuffer&& other) noexcept;
  PoolBuffer& operator=(PoolBuffer&& other) noexcept;
  PoolBuffer(const PoolBuffer&) = delete;
  PoolBuffer& operator=(const PoolBuffer&) = delete;
  ~PoolBuffer();
  float* f() const { return static_cast<float*>(ptr_); }
  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  CachingPool* pool_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

class Mlp {
 public:
  // Weights ~ U(-a, a) with a = sqrt(6 / fan_in) from stream `seed`; biases and momentum zero.
  static Result<std::unique_ptr<Mlp>> Create(CachingPool& pool, TensorMath& math, MlpShape shape,
                                             std::uint64_t seed, bool with_momentum);
  const MlpShape& shape() const { return shape_; }
  std::size_t parameter_count() const { return params_.size(); }
  std::vector<ParameterSpec> parameter_specs() const;
  float* parameter(std::size_t p) const { return params_[p].f(); }
  float* momentum(std::size_t p) const { return momentum_[p].f(); }
  std::size_t elements(std::size_t p) const { return params_[p].bytes() / sizeof(float); }
  // FNV-1a over every parameter's bytes (copied to the host): equal on every rank holding equal weights.
  Result<std::uint64_t> checksum(TensorMath& math) const;

 private:
  explicit Mlp(MlpShape shape) : shape_(shape) {}
  MlpShape shape_;
  std::vector<PoolBuffer> params_;
  std::vector<PoolBuffer> momentum_;
};

// Where backward writes parameter p's gradient, and what to do once it is written.
struct GradientTarget {
  std::function<Result<float*>(std::size_t p)> buffer;
  std::function<Status(std::size_t p)> ready;
};

// Forward on `batch` rows of x into the final layer's output (activations from `pool`, tag `tag`).
Result<PoolBuffer> Forward(TensorMath& math, const Mlp& mlp, const float* x, int batch, CachingPool& pool,
                           TagId tag);
// x ~ U(-sqrt 3, sqrt 3) from stream `seed`, targets = teacher(x); both allocated from `pool`.
Status MakeBatch(TensorMath& math, const Mlp& teacher, std::uint64_t seed, int batch, CachingPool& pool,
                 TagId tag, PoolBuffer* x, PoolBuffer* target);
// Forward, MSE loss and backward; returns the loss before the update.
Result<double> TrainBatch(TensorMath& math, const Mlp& student, const float* x, const float* target,
                          int batch, CachingPool& pool, TagId tag, const GradientTarget& gradients);

}  // namespace memcoord::train
