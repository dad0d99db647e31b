#include "examples/train/mlp.h"

#include <cmath>
#include <utility>

namespace memcoord::train {

std::vector<int> MlpShape::widths() const {
  std::vector<int> w{in};
  for (int i = 0; i < depth; ++i) w.push_back(hidden);
  w.push_back(out);
  return w;
}

std::size_t MlpShape::parameter_count() const {
  const std::vector<int> w = widths();
  std::size_t n = 0;
  for (std::size_t l = 0; l + 1 < w.size(); ++l) n += static_cast<std::size_t>(w[l + 1]) * (w[l] + 1);
  return n;
}

Result<PoolBuffer> PoolBuffer::Make(CachingPool& pool, std::size_t bytes, TagId tag) {
  MEMCOORD_ASSIGN_OR_RETURN(void* p, pool.allocate(bytes, kDefaultStream, tag));
  PoolBuffer b;
  b.pool_ = &pool;
  b.ptr_ = p;
  b.bytes_ = bytes;
  return b;
}

PoolBuffer::PoolBuffer(PoolBuffer&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)),
      ptr_(std::exchange(other.ptr_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

PoolBuffer& PoolBuffer::operator=(PoolBuffer&& other) noexcept {
  if (this != &other) {
    if (pool_ != nullptr && ptr_ != nullptr) (void)pool_->deallocate(ptr_);
    pool_ = std::exchange(other.pool_, nullptr);
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

PoolBuffer::~PoolBuffer() {
  if (pool_ != nullptr && ptr_ != nullptr) (void)pool_->deallocate(ptr_);
}

Result<std::unique_ptr<Mlp>> Mlp::Create(CachingPool& pool, TensorMath& math, MlpShape shape,
                                         std::uint64_t seed, bool with_momentum) {
  std::unique_ptr<Mlp> mlp(new Mlp(shape));
  MEMCOORD_ASSIGN_OR_RETURN(TagId params_tag, pool.tag("parameters"));
  MEMCOORD_ASSIGN_OR_RETURN(TagId optimizer_tag, pool.tag("optimizer"));
  const std::vector<int> w = shape.widths();
  for (std::size_t l = 0; l + 1 < w.size(); ++l) {
    const std::size_t weights = static_cast<std::size_t>(w[l + 1]) * w[l];
    const std::size_t sizes[2] = {weights, static_cast<std::size_t>(w[l + 1])};
    for (int k = 0; k < 2; ++k) {
      MEMCOORD_ASSIGN_OR_RETURN(PoolBuffer p, PoolBuffer::Make(pool, sizes[k] * sizeof(float), params_tag));
      if (k == 0) {
        const float a = std::sqrt(6.0f / static_cast<float>(w[l]));
        MEMCOORD_RETURN_IF_ERROR(math.fill_uniform(p.f(), sizes[k], seed + l, a));
      } else {
        MEMCOORD_RETURN_IF_ERROR(math.fill_zero(p.f(), sizes[k]));
      }
      mlp->params_.push_back(std::move(p));
      if (with_momentum) {
        MEMCOORD_ASSIGN_OR_RETURN(PoolBuffer m,
                                  PoolBuffer::Make(pool, sizes[k] * sizeof(float), optimizer_tag));
        MEMCOORD_RETURN_IF_ERROR(math.fill_zero(m.f(), sizes[k]));
        mlp->momentum_.push_back(std::move(m));
      }
    }
  }
  MEMCOORD_RETURN_IF_ERROR(math.sync());
  return mlp;
}

std::vector<ParameterSpec> Mlp::parameter_specs() const {
  std::vector<ParameterSpec> specs;
  for (const PoolBuffer& p : params_) specs.push_back({p.bytes() / sizeof(float), DataType::kFloat32});
  return specs;
}

Result<std::uint64_t> Mlp::checksum(TensorMath& math) const {
  std::uint64_t h = 1469598103934665603ull;
  std::vector<unsigned char> host;
  for (const PoolBuffer& p : params_) {
    host.resize(p.bytes());
    MEMCOORD_RETURN_IF_ERROR(math.to_host(host.data(), p.get(), p.bytes()));
    for (unsigned char c : host) h = (h ^ c) * 1099511628211ull;
  }
  return h;
}

namespace {

// Activations of every layer boundary: acts[0] is the input (not owned), acts[l] the output of layer l.
struct ForwardPass {
  std::vector<PoolBuffer> outputs;  // outputs[l] = output of layer l
};

Status RunForward(TensorMath& math, const Mlp& mlp, const float* x, int batch, CachingPool& pool, TagId tag,
                  ForwardPass* pass) {
  const std::vector<int> w = mlp.shape().widths();
  const float* in = x;
  for (std::size_t l = 0; l + 1 < w.size(); ++l) {
    MEMCOORD_ASSIGN_OR_RETURN(
        PoolBuffer y,
        PoolBuffer::Make(pool, static_cast<std::size_t>(batch) * w[l + 1] * sizeof(float), tag));
    const bool relu = l + 2 < w.size();
    MEMCOORD_RETURN_IF_ERROR(math.linear_forward(in, mlp.parameter(2 * l), mlp.parameter(2 * l + 1), y.f(),
                                                 batch, w[l], w[l + 1], relu));
    in = y.f();
    pass->outputs.push_back(std::move(y));
  }
  return Status::Ok();
}

}  // namespace

Result<PoolBuffer> Forward(TensorMath& math, const Mlp& mlp, const float* x, int batch, CachingPool& pool,
                           TagId tag) {
  ForwardPass pass;
  MEMCOORD_RETURN_IF_ERROR(RunForward(math, mlp, x, batch, pool, tag, &pass));
  return std::move(pass.outputs.back());
}

Status MakeBatch(TensorMath& math, const Mlp& teacher, std::uint64_t seed, int batch, CachingPool& pool,
                 TagId tag, PoolBuffer* x, PoolBuffer* target) {
  const MlpShape& s = teacher.shape();
  MEMCOORD_ASSIGN_OR_RETURN(
      *x, PoolBuffer::Make(pool, static_cast<std::size_t>(batch) * s.in * sizeof(float), tag));
  MEMCOORD_RETURN_IF_ERROR(
      math.fill_uniform(x->f(), static_cast<std::size_t>(batch) * s.in, seed, std::sqrt(3.0f)));
  MEMCOORD_ASSIGN_OR_RETURN(*target, Forward(math, teacher, x->f(), batch, pool, tag));
  return Status::Ok();
}

Result<double> TrainBatch(TensorMath& math, const Mlp& student, const float* x, const float* target,
                          int batch, CachingPool& pool, TagId tag, const GradientTarget& gradients) {
  const std::vector<int> w = student.shape().widths();
  const std::size_t layers = w.size() - 1;
  ForwardPass pass;
  MEMCOORD_RETURN_IF_ERROR(RunForward(math, student, x, batch, pool, tag, &pass));
  const std::size_t n_out = static_cast<std::size_t>(batch) * w.back();
  MEMCOORD_ASSIGN_OR_RETURN(PoolBuffer dy, PoolBuffer::Make(pool, n_out * sizeof(float), tag));
  MEMCOORD_ASSIGN_OR_RETURN(double loss, math.mse_loss(pass.outputs.back().f(), target, dy.f(), n_out));
  for (std::size_t l = layers; l-- > 0;) {
    const float* in = l == 0 ? x : pass.outputs[l - 1].f();
    PoolBuffer dx;
    if (l > 0) {
      MEMCOORD_ASSIGN_OR_RETURN(
          dx, PoolBuffer::Make(pool, static_cast<std::size_t>(batch) * w[l] * sizeof(float), tag));
    }
    MEMCOORD_ASSIGN_OR_RETURN(float* dw, gradients.buffer(2 * l));
    MEMCOORD_ASSIGN_OR_RETURN(float* db, gradients.buffer(2 * l + 1));
    MEMCOORD_RETURN_IF_ERROR(math.linear_backward(in, student.parameter(2 * l), dy.f(),
                                                  l > 0 ? dx.f() : nullptr, dw, db, batch, w[l], w[l + 1]));
    MEMCOORD_RETURN_IF_ERROR(gradients.ready(2 * l + 1));
    MEMCOORD_RETURN_IF_ERROR(gradients.ready(2 * l));
    if (l > 0) {
      MEMCOORD_RETURN_IF_ERROR(
          math.relu_backward(dx.f(), pass.outputs[l - 1].f(), static_cast<std::size_t>(batch) * w[l]));
      dy = std::move(dx);
    }
  }
  return loss;
}

}  // namespace memcoord::train
