// Launchers for memcoord-train's CUDA kernels, declared in plain C++ so cuda_math.cc needs no nvcc. Each
// enqueues on the default stream and returns the launch's cudaError_t as an int (0: success). Built only
// with the CUDA toolkit (MEMCOORD_TRAIN_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

namespace memcoord::train::cuda {

int FillUniform(float* p, std::size_t n, std::uint64_t seed, float scale);
int FillZero(float* p, std::size_t n);
int LinearForward(const float* x, const float* w, const float* b, float* y, int batch, int in, int out,
                  bool relu);
int LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                   int batch, int in, int out);
int ReluBackward(float* dy, const float* y, std::size_t n);
// Writes dpred (when not null) and adds the sum of squared differences to *sum_out (device memory, zeroed by
// the caller).
int MseLoss(const float* pred, const float* target, float* dpred, std::size_t n, double* sum_out);
int SgdMomentum(float* w, const float* g, float* m, std::size_t n, float lr, float mu);

}  // namespace memcoord::train::cuda
