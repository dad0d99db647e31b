#include "examples/train/replica.h"

#include <string>

#include "examples/train/random.h"

namespace memcoord::train {

Result<double> Replica::TrainStep(std::int64_t step, int batch) {
  const std::string at = "step " + std::to_string(step) + ": ";
  double loss = 0;
  {
    PoolBuffer x, target;
    const std::uint64_t seed =
        StreamSeed(p_.seed, p_.model_id, 3 + static_cast<std::uint64_t>(p_.group.rank()),
                   static_cast<std::uint64_t>(step));
    Status made = MakeBatch(p_.math, p_.teacher, seed, batch, p_.activations, p_.activation_tag, &x, &target);
    if (!made.ok()) return made.WithContext(at + "batch: ");
    Result<double> l = TrainBatch(p_.math, p_.student, x.f(), target.f(), batch, p_.activations,
                                  p_.activation_tag, p_.gradients.target());
    if (!l.ok()) return l.status().WithContext(at + "forward/backward: ");
    loss = *l;
  }
  if (Status s = p_.gradients.finish(); !s.ok()) return s.WithContext(at + "gradients: ");
  for (std::size_t i = 0; i < p_.student.parameter_count(); ++i) {
    Status s = p_.math.sgd_momentum(p_.student.parameter(i), p_.gradients.gradient(i), p_.student.momentum(i),
                                    p_.student.elements(i), p_.lr, p_.momentum);
    if (!s.ok()) return s.WithContext(at + "update: ");
  }
  return loss;
}

Result<double> Replica::Evaluate(std::int64_t step, int eval_batch) {
  const std::string at = "evaluation at step " + std::to_string(step) + ": ";
  PoolBuffer x, target;
  const std::uint64_t seed =
      StreamSeed(p_.seed, p_.model_id, 1000 + static_cast<std::uint64_t>(p_.group.rank()),
                 static_cast<std::uint64_t>(step));
  Status made = MakeBatch(p_.math, p_.teacher, seed, eval_batch, p_.activations, p_.eval_tag, &x, &target);
  if (!made.ok()) return made.WithContext(at);
  Result<PoolBuffer> pred = Forward(p_.math, p_.student, x.f(), eval_batch, p_.activations, p_.eval_tag);
  if (!pred.ok()) return pred.status().WithContext(at);
  const std::size_t n =
      static_cast<std::size_t>(eval_batch) * static_cast<std::size_t>(p_.student.shape().out);
  Result<double> loss = p_.math.mse_loss(pred->f(), target.f(), nullptr, n);
  if (!loss.ok()) return loss.status().WithContext(at);
  double mean = *loss;
  if (Status s = p_.group.allreduce(&mean, &mean, 1, DataType::kFloat64, ReduceOp::kAvg); !s.ok())
    return s.WithContext(at + "group mean: ");
  return mean;
}

}  // namespace memcoord::train
