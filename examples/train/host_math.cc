// HostMath: TensorMath over host-addressable memory with plain loops (the compiler vectorizes the inner
// ones). Used on the host backend, where a pool's memory is ordinary RAM standing in for a GPU.
#include <algorithm>
#include <cstring>

#include "examples/train/random.h"
#include "examples/train/tensor_math.h"

namespace memcoord::train {
namespace {

class HostMath final : public TensorMath {
 public:
  bool on_device() const override { return false; }
  const char* name() const override { return "host loops"; }

  Status fill_uniform(float* p, std::size_t n, std::uint64_t seed, float scale) override {
    for (std::size_t i = 0; i < n; ++i) p[i] = scale * UniformAt(seed, i);
    return Status::Ok();
  }
  Status fill_zero(float* p, std::size_t n) override {
    std::fill(p, p + n, 0.0f);
    return Status::Ok();
  }
  Status linear_forward(const float* x, const float* w, const float* b, float* y, int batch, int in, int out,
                        bool relu) override {
    for (int n = 0; n < batch; ++n) {
      const float* xr = x + static_cast<std::size_t>(n) * in;
      float* yr = y + static_cast<std::size_t>(n) * out;
      for (int o = 0; o < out; ++o) {
        const float* wr = w + static_cast<std::size_t>(o) * in;
        float s = 0.0f;
        for (int i = 0; i < in; ++i) s += xr[i] * wr[i];
        s += b[o];
        yr[o] = relu && s < 0.0f ? 0.0f : s;
      }
    }
    return Status::Ok();
  }
  Status linear_backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                         int batch, int in, int out) override {
    std::fill(dw, dw + static_cast<std::size_t>(out) * in, 0.0f);
    std::fill(db, db + out, 0.0f);
    for (int n = 0; n < batch; ++n) {
      const float* xr = x + static_cast<std::size_t>(n) * in;
      const float* dyr = dy + static_cast<std::size_t>(n) * out;
      for (int o = 0; o < out; ++o) {
        const float g = dyr[o];
        if (g == 0.0f) continue;
        float* dwr = dw + static_cast<std::size_t>(o) * in;
        for (int i = 0; i < in; ++i) dwr[i] += g * xr[i];
        db[o] += g;
      }
    }
    if (dx != nullptr) {
      std::fill(dx, dx + static_cast<std::size_t>(batch) * in, 0.0f);
      for (int n = 0; n < batch; ++n) {
        const float* dyr = dy + static_cast<std::size_t>(n) * out;
        float* dxr = dx + static_cast<std::size_t>(n) * in;
        for (int o = 0; o < out; ++o) {
          const float g = dyr[o];
          if (g == 0.0f) continue;
          const float* wr = w + static_cast<std::size_t>(o) * in;
          for (int i = 0; i < in; ++i) dxr[i] += g * wr[i];
        }
      }
    }
    return Status::Ok();
  }
  Status relu_backward(float* dy, const float* y, std::size_t n) override {
    for (std::size_t i = 0; i < n; ++i) {
      if (y[i] <= 0.0f) dy[i] = 0.0f;
    }
    return Status::Ok();
  }
  Result<double> mse_loss(const float* pred, const float* target, float* dpred, std::size_t n) override {
    double sum = 0.0;
    const float scale = 2.0f / static_cast<float>(n);
    for (std::size_t i = 0; i < n; ++i) {
      const float d = pred[i] - target[i];
      sum += static_cast<double>(d) * d;
      if (dpred != nullptr) dpred[i] = scale * d;
    }
    return sum / static_cast<double>(n);
  }
  Status sgd_momentum(float* w, const float* g, float* m, std::size_t n, float lr, float mu) override {
    for (std::size_t i = 0; i < n; ++i) {
      m[i] = mu * m[i] + g[i];
      w[i] -= lr * m[i];
    }
    return Status::Ok();
  }
  Status to_host(void* host, const void* src, std::size_t bytes) override {
    std::memcpy(host, src, bytes);
    return Status::Ok();
  }
  Status from_host(void* dst, const void* host, std::size_t bytes) override {
    std::memcpy(dst, host, bytes);
    return Status::Ok();
  }
  Status sync() override { return Status::Ok(); }
};

}  // namespace

std::unique_ptr<TensorMath> MakeHostMath() { return std::make_unique<HostMath>(); }

#ifndef MEMCOORD_TRAIN_CUDA
Result<std::unique_ptr<TensorMath>> MakeCudaMath() {
  return Unavailable("memcoord-train was built without CUDA kernels");
}
#endif

}  // namespace memcoord::train
