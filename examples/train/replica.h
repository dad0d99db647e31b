// Replica: one rank's copy of a model and everything one training step touches — the teacher that labels
// its data, the student it trains, the gradient path to the group, the activation pool. TrainStep runs
// forward, backward (gradients averaged over the group as buckets fill) and the SGD update on a fresh batch;
// Evaluate runs one large held-out batch at once (the evaluation's temporaries go back to the pool's cache,
// which is what a coordinator trim later releases) and returns the group's mean loss. Data for step s on
// group rank g comes from its own random stream, so ranks see different data but agree on the weights.
//
// Thread safety: the training thread only. Ownership: borrows everything; all of it must outlive the
// Replica. Errors: the pools', math's and communicators' errors, with what failed prefixed.
#pragma once

#include <cstdint>

#include "examples/train/gradient_path.h"
#include "examples/train/mlp.h"

namespace memcoord::train {

struct ReplicaParts {
  TensorMath& math;
  const Mlp& teacher;
  Mlp& student;
  GradientPath& gradients;
  Communicator& group;  // host buffers (MPI): the evaluation's mean
  CachingPool& activations;
  TagId activation_tag = kUntagged;
  TagId eval_tag = kUntagged;
  std::uint64_t seed = 1;
  std::uint64_t model_id = 0;
  float lr = 0.02f;
  float momentum = 0.9f;
};

class Replica {
 public:
  explicit Replica(ReplicaParts parts) : p_(parts) {}
  // Returns the loss before the update.
  Result<double> TrainStep(std::int64_t step, int batch);
  Result<double> Evaluate(std::int64_t step, int eval_batch);

 private:
  ReplicaParts p_;
};

}  // namespace memcoord::train
