#include "coordinator/planner/fit_advice.h"

#include "common/bytes.h"
#include "coordinator/planner/memory_estimator.h"

namespace memcoord::planner {
namespace {

std::uint64_t ModelBytes(const ModelRequest& m) {
  Result<MemoryEstimate> e = EstimateMemory(m.spec, m.options);
  if (!e.ok()) return 0;
  std::uint64_t sum = e->per_device_overhead_bytes;
  for (const UnitMemory& u : e->units) sum += u.bytes;
  return m.split == SplitKind::kWhole ? e->total_bytes : sum;
}

std::string Label(const PlanRequest& r, std::size_t i) {
  return "models[" + std::to_string(i) + "] (" + r.models[i].name + "): ";
}

}  // namespace

std::vector<FitSuggestion> SuggestFits(const PlanRequest& request, const FitsFunction& fits) {
  std::vector<FitSuggestion> out;
  const auto consider = [&](std::size_t i, const std::string& change, const ModelRequest& changed) {
    const std::uint64_t before = ModelBytes(request.models[i]);
    const std::uint64_t after = ModelBytes(changed);
    if (after == 0 || after >= before) return;
    PlanRequest trial = request;
    trial.models[i] = changed;
    out.push_back({Label(request, i) + change, before - after, 0, fits(trial)});
  };
  for (std::size_t i = 0; i < request.models.size(); ++i) {
    const ModelRequest& m = request.models[i];
    const bool training = m.options.mode == RunMode::kTraining;
    for (Precision p : {Precision::kBf16, Precision::kAmpBf16}) {
      if (p == m.options.precision || (p == Precision::kAmpBf16 && !training)) continue;
      ModelRequest changed = m;
      changed.options.precision = p;
      consider(i, "precision " + std::string(PrecisionName(p)), changed);
    }
    if (m.split == SplitKind::kWhole) {  // spreading it over devices saves nothing but may fit
      PlanRequest trial = request;
      trial.models[i].split = SplitKind::kLayers;
      if (fits(trial)) out.push_back({Label(request, i) + "split layers", 0, 0, true});
    }
    if (training && !m.options.checkpointing && m.spec.family != ModelFamily::kResNet50) {
      ModelRequest changed = m;
      changed.options.checkpointing = true;
      consider(i, "checkpointing full", changed);
    }
    if (m.options.batch > 1) {
      // The largest batch that fits, by bisection (feasibility falls as the batch grows).
      std::int64_t lo = 0;
      std::int64_t hi = m.options.batch - 1;
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        PlanRequest trial = request;
        trial.models[i].options.batch = mid;
        if (fits(trial)) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      ModelRequest changed = m;
      changed.options.batch = lo > 0 ? lo : m.options.batch / 2;
      consider(i, "batch " + std::to_string(changed.options.batch), changed);
    }
  }
  // More devices like the largest one: the fewest that make it fit, doubling then bisecting.
  if (!request.devices.empty()) {
    DeviceSpec largest = request.devices.front();
    for (const DeviceSpec& d : request.devices) {
      if (d.usable_bytes() > largest.usable_bytes()) largest = d;
    }
    const auto with_extra = [&](std::size_t extra) {
      PlanRequest trial = request;
      for (std::size_t k = 0; k < extra; ++k) {
        DeviceSpec d = largest;
        d.name = "extra" + std::to_string(k);
        trial.devices.push_back(d);
      }
      return trial;
    };
    std::size_t hi = 1;
    const std::size_t limit = 4096;
    while (hi < limit && !fits(with_extra(hi))) hi *= 2;
    if (hi <= limit && fits(with_extra(hi))) {
      std::size_t lo = hi / 2 + 1;
      while (lo < hi) {
        const std::size_t mid = lo + (hi - lo) / 2;
        if (fits(with_extra(mid))) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      out.push_back({std::to_string(hi) + " more device(s) of " + FormatBytes(largest.capacity_bytes), 0,
                     hi * largest.usable_bytes(), true});
    }
  }
  return out;
}

}  // namespace memcoord::planner
