// memcoord-train's kernels: one thread per output element, no shared-memory tiling. The MLPs are small;
// clarity wins over speed here.
#include <cuda_runtime.h>

#include "examples/train/cuda_kernels.h"
#include "examples/train/random.h"

namespace memcoord::train::cuda {
namespace {

constexpr int kThreads = 256;

unsigned int BlocksFor(std::size_t items) {
  std::size_t blocks = (items + kThreads - 1) / kThreads;
  if (blocks == 0) blocks = 1;
  if (blocks > 65535) blocks = 65535;
  return static_cast<unsigned int>(blocks);
}

__global__ void FillUniformKernel(float* p, std::size_t n, std::uint64_t seed, float scale) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    p[i] = scale * UniformAt(seed, i);
  }
}

__global__ void ForwardKernel(const float* x, const float* w, const float* b, float* y, int batch, int in,
                              int out, bool relu) {
  const std::size_t total = static_cast<std::size_t>(batch) * out;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = k / out;
    const std::size_t o = k % out;
    const float* xr = x + n * in;
    const float* wr = w + o * in;
    float s = b[o];
    for (int i = 0; i < in; ++i) s += xr[i] * wr[i];
    y[k] = relu && s < 0.0f ? 0.0f : s;
  }
}

__global__ void WeightGradKernel(const float* x, const float* dy, float* dw, int batch, int in, int out) {
  const std::size_t total = static_cast<std::size_t>(out) * in;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t o = k / in;
    const std::size_t i = k % in;
    float s = 0.0f;
    for (int n = 0; n < batch; ++n)
      s += dy[static_cast<std::size_t>(n) * out + o] * x[static_cast<std::size_t>(n) * in + i];
    dw[k] = s;
  }
}

__global__ void BiasGradKernel(const float* dy, float* db, int batch, int out) {
  for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int n = 0; n < batch; ++n) s += dy[static_cast<std::size_t>(n) * out + o];
    db[o] = s;
  }
}

__global__ void InputGradKernel(const float* w, const float* dy, float* dx, int batch, int in, int out) {
  const std::size_t total = static_cast<std::size_t>(batch) * in;
  for (std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t n = k / in;
    const std::size_t i = k % in;
    float s = 0.0f;
    for (int o = 0; o < out; ++o) s += dy[n * out + o] * w[static_cast<std::size_t>(o) * in + i];
    dx[k] = s;
  }
}

__global__ void ReluBackwardKernel(float* dy, const float* y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (y[i] <= 0.0f) dy[i] = 0.0f;
  }
}

__global__ void MseKernel(const float* pred, const float* target, float* dpred, std::size_t n,
                          double* sum_out) {
  __shared__ double partial[kThreads];
  double local = 0.0;
  const float scale = 2.0f / static_cast<float>(n);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const float d = pred[i] - target[i];
    local += static_cast<double>(d) * d;
    if (dpred != nullptr) dpred[i] = scale * d;
  }
  partial[threadIdx.x] = local;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum_out, partial[0]);
}

__global__ void SgdKernel(float* w, const float* g, float* m, std::size_t n, float lr, float mu) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    m[i] = mu * m[i] + g[i];
    w[i] -= lr * m[i];
  }
}

int LastError() { return static_cast<int>(cudaGetLastError()); }

}  // namespace

int FillUniform(float* p, std::size_t n, std::uint64_t seed, float scale) {
  FillUniformKernel<<<BlocksFor(n), kThreads>>>(p, n, seed, scale);
  return LastError();
}

int FillZero(float* p, std::size_t n) {
  return static_cast<int>(cudaMemsetAsync(p, 0, n * sizeof(float), 0));
}

int LinearForward(const float* x, const float* w, const float* b, float* y, int batch, int in, int out,
                  bool relu) {
  ForwardKernel<<<BlocksFor(static_cast<std::size_t>(batch) * out), kThreads>>>(x, w, b, y, batch, in, out,
                                                                                relu);
  return LastError();
}

int LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                   int batch, int in, int out) {
  WeightGradKernel<<<BlocksFor(static_cast<std::size_t>(out) * in), kThreads>>>(x, dy, dw, batch, in, out);
  BiasGradKernel<<<BlocksFor(static_cast<std::size_t>(out)), kThreads>>>(dy, db, batch, out);
  if (dx != nullptr) {
    InputGradKernel<<<BlocksFor(static_cast<std::size_t>(batch) * in), kThreads>>>(w, dy, dx, batch, in, out);
  }
  return LastError();
}

int ReluBackward(float* dy, const float* y, std::size_t n) {
  ReluBackwardKernel<<<BlocksFor(n), kThreads>>>(dy, y, n);
  return LastError();
}

int MseLoss(const float* pred, const float* target, float* dpred, std::size_t n, double* sum_out) {
  MseKernel<<<BlocksFor(n), kThreads>>>(pred, target, dpred, n, sum_out);
  return LastError();
}

int SgdMomentum(float* w, const float* g, float* m, std::size_t n, float lr, float mu) {
  SgdKernel<<<BlocksFor(n), kThreads>>>(w, g, m, n, lr, mu);
  return LastError();
}

}  // namespace memcoord::train::cuda
