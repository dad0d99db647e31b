// TensorMath: the handful of dense fp32 operations an MLP needs, on one kind of memory. HostMath runs plain
// C++ loops on host-addressable memory (the host backend, a simulated GPU); CudaMath (MEMCOORD_TRAIN_CUDA)
// launches simple kernels on the default stream over device memory. Layouts are row-major: activations are
// [batch x features], a weight is [out x in], so y = x W^T + b.
//
// Every call is asynchronous on CudaMath (ordered on the default stream) except those that return host
// values (mse_loss, to_host) and sync(). Errors: a CUDA error becomes INTERNAL naming the operation; host
// math never fails. Thread safety: one thread at a time. Ownership: pointers are borrowed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/result.h"

namespace memcoord::train {

class TensorMath {
 public:
  virtual ~TensorMath() = default;
  virtual bool on_device() const = 0;  // true: pointers are device memory
  virtual const char* name() const = 0;

  // p[i] = scale * U(-1, 1) from stream `seed`.
  virtual Status fill_uniform(float* p, std::size_t n, std::uint64_t seed, float scale) = 0;
  virtual Status fill_zero(float* p, std::size_t n) = 0;
  // y[batch x out] = x[batch x in] W^T + b, then max(0, .) when relu.
  virtual Status linear_forward(const float* x, const float* w, const float* b, float* y, int batch, int in,
                                int out, bool relu) = 0;
  // From dy[batch x out]: dw = dy^T x, db = column sums of dy, dx = dy W (skipped when dx is null).
  virtual Status linear_backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                                 float* db, int batch, int in, int out) = 0;
  // dy[i] = 0 where y[i] <= 0 (y is the ReLU's output).
  virtual Status relu_backward(float* dy, const float* y, std::size_t n) = 0;
  // Mean squared error over n values; dpred = d loss / d pred (null: loss only). Synchronizes.
  virtual Result<double> mse_loss(const float* pred, const float* target, float* dpred, std::size_t n) = 0;
  // SGD with momentum: m = mu m + g; w -= lr m.
  virtual Status sgd_momentum(float* w, const float* g, float* m, std::size_t n, float lr, float mu) = 0;
  // Copies between this math's memory and host memory (or within it: copy). Synchronous.
  virtual Status to_host(void* host, const void* src, std::size_t bytes) = 0;
  virtual Status from_host(void* dst, const void* host, std::size_t bytes) = 0;
  virtual Status sync() = 0;
};

std::unique_ptr<TensorMath> MakeHostMath();
// UNAVAILABLE when this build has no CUDA kernels.
Result<std::unique_ptr<TensorMath>> MakeCudaMath();

}  // namespace memcoord::train
