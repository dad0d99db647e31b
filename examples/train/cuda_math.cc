// CudaMath: TensorMath over device memory through the kernels in cuda_kernels.cu, all on the default stream.
// mse_loss reduces into an 8-byte device scalar (cudaMalloc'd once: it is the math's own workspace, not a
// training tensor) and copies it back, which synchronizes.
#include <cuda_runtime.h>

#include <string>

#include "examples/train/cuda_kernels.h"
#include "examples/train/tensor_math.h"

namespace memcoord::train {
namespace {

Status Check(int code, const char* what) {
  if (code == 0) return Status::Ok();
  return Internal(std::string("CUDA ") + what + ": " + cudaGetErrorString(static_cast<cudaError_t>(code)));
}

class CudaMath final : public TensorMath {
 public:
  explicit CudaMath(double* scalar) : scalar_(scalar) {}
  ~CudaMath() override { (void)cudaFree(scalar_); }

  bool on_device() const override { return true; }
  const char* name() const override { return "CUDA kernels"; }

  Status fill_uniform(float* p, std::size_t n, std::uint64_t seed, float scale) override {
    return Check(cuda::FillUniform(p, n, seed, scale), "fill");
  }
  Status fill_zero(float* p, std::size_t n) override { return Check(cuda::FillZero(p, n), "memset"); }
  Status linear_forward(const float* x, const float* w, const float* b, float* y, int batch, int in, int out,
                        bool relu) override {
    return Check(cuda::LinearForward(x, w, b, y, batch, in, out, relu), "linear forward");
  }
  Status linear_backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                         int batch, int in, int out) override {
    return Check(cuda::LinearBackward(x, w, dy, dx, dw, db, batch, in, out), "linear backward");
  }
  Status relu_backward(float* dy, const float* y, std::size_t n) override {
    return Check(cuda::ReluBackward(dy, y, n), "relu backward");
  }
  Result<double> mse_loss(const float* pred, const float* target, float* dpred, std::size_t n) override {
    MEMCOORD_RETURN_IF_ERROR(
        Check(static_cast<int>(cudaMemsetAsync(scalar_, 0, sizeof(double), 0)), "memset"));
    MEMCOORD_RETURN_IF_ERROR(Check(cuda::MseLoss(pred, target, dpred, n, scalar_), "mse"));
    double sum = 0.0;
    MEMCOORD_RETURN_IF_ERROR(Check(
        static_cast<int>(cudaMemcpy(&sum, scalar_, sizeof(double), cudaMemcpyDeviceToHost)), "loss copy"));
    return sum / static_cast<double>(n);
  }
  Status sgd_momentum(float* w, const float* g, float* m, std::size_t n, float lr, float mu) override {
    return Check(cuda::SgdMomentum(w, g, m, n, lr, mu), "sgd");
  }
  Status to_host(void* host, const void* src, std::size_t bytes) override {
    return Check(static_cast<int>(cudaMemcpy(host, src, bytes, cudaMemcpyDefault)), "copy to host");
  }
  Status from_host(void* dst, const void* host, std::size_t bytes) override {
    return Check(static_cast<int>(cudaMemcpy(dst, host, bytes, cudaMemcpyDefault)), "copy from host");
  }
  Status sync() override { return Check(static_cast<int>(cudaDeviceSynchronize()), "synchronize"); }

 private:
  double* scalar_;
};

}  // namespace

Result<std::unique_ptr<TensorMath>> MakeCudaMath() {
  void* scalar = nullptr;
  const cudaError_t e = cudaMalloc(&scalar, sizeof(double));
  if (e != cudaSuccess) return Unavailable(std::string("no usable GPU: ") + cudaGetErrorString(e));
  return std::unique_ptr<TensorMath>(std::make_unique<CudaMath>(static_cast<double*>(scalar)));
}

}  // namespace memcoord::train
