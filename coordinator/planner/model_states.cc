#include "coordinator/planner/model_states.h"

namespace memcoord::planner {
namespace {

double WeightBytes(Precision p) { return p == Precision::kBf16 ? 2 : 4; }
double ComputeBytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }
double StatesPerParam(Optimizer o) {
  return o == Optimizer::kAdamW ? 2 : (o == Optimizer::kSgdMomentum ? 1 : 0);
}
double TemporariesPerParam(Optimizer o) { return o == Optimizer::kAdamW ? 1 : 0; }

ModelStates ZeroStates(double params, double largest_unit, Precision p, Optimizer o, const Parallelism& par) {
  const double n = static_cast<double>(par.data_ranks);
  const double w = p == Precision::kFp32 ? 4 : 2;
  const double k = ZeroOptimizerBytesPerParam(p, o);
  ModelStates s;
  s.weights = w * params;
  s.gradients = w * params;
  s.optimizer_state = k * params / n;
  if (par.sharding == Sharding::kZero2 || par.sharding == Sharding::kZero3) s.gradients /= n;
  if (par.sharding == Sharding::kZero3) {
    s.weights /= n;
    s.gathered = 2 * w * largest_unit;  // the block being computed and the one prefetched
  }
  return s;
}

}  // namespace

double ZeroOptimizerBytesPerParam(Precision p, Optimizer o) {
  const double master = p == Precision::kFp32 ? 0 : 4;
  return master + 4 * StatesPerParam(o);
}

ModelStates ModelStatesPerRank(double params, double largest_unit, Precision p, Optimizer o,
                               const Parallelism& par, bool training) {
  ModelStates s;
  const double wb = WeightBytes(p);
  s.weights = wb * params;
  if (!training) return s;
  switch (par.sharding) {
    case Sharding::kZero1:
    case Sharding::kZero2:
    case Sharding::kZero3:
      return ZeroStates(params, largest_unit, p, o, par);
    case Sharding::kFsdp: {
      const double n = static_cast<double>(par.data_ranks);
      s.weights = wb * params / n;
      s.gradients = wb * params / n;
      s.optimizer_state = wb * StatesPerParam(o) * params / n;
      s.optimizer_temporaries = wb * TemporariesPerParam(o) * params / n;
      s.gathered = 2 * ComputeBytes(p) * largest_unit + wb * largest_unit;
      return s;
    }
    case Sharding::kNone:
      break;
  }
  s.gradients = wb * params;
  s.optimizer_state = wb * StatesPerParam(o) * params;
  s.optimizer_temporaries = wb * TemporariesPerParam(o) * params;
  if (par.data_ranks > 1) s.ddp_buckets = s.gradients;
  return s;
}

}  // namespace memcoord::planner
