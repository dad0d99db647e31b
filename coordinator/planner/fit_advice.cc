#include "coordinator/planner/fit_advice.h"

#include <algorithm>
#include <numeric>

#include "common/bytes.h"
#include "coordinator/planner/limits.h"
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

// Collects the suggestions for one request; each Suggest* step adds the ones of its kind.
class Advisor {
 public:
  Advisor(const PlanRequest& request, const FitsFunction& fits) : request_(request), fits_(fits) {}

  // Model i changed to `changed`: suggested when it saves bytes, with whether that alone fits.
  void Consider(std::size_t i, const std::string& change, const ModelRequest& changed) {
    const std::uint64_t before = ModelBytes(request_.models[i]);
    const std::uint64_t after = ModelBytes(changed);
    if (after == 0 || after >= before) return;
    PlanRequest trial = request_;
    trial.models[i] = changed;
    out_.push_back({Label(request_, i) + change, before - after, 0, fits_(trial, i)});
  }

  void SuggestPrecisions(std::size_t i) {
    const ModelRequest& m = request_.models[i];
    const bool training = m.options.mode == RunMode::kTraining;
    for (Precision p : {Precision::kBf16, Precision::kAmpBf16}) {
      if (p == m.options.precision || (p == Precision::kAmpBf16 && !training)) continue;
      ModelRequest changed = m;
      changed.options.precision = p;
      Consider(i, "precision " + std::string(PrecisionName(p)), changed);
    }
  }

  // Spreading a whole model over devices saves nothing but may fit.
  void SuggestLayerSplit(std::size_t i) {
    if (request_.models[i].split != SplitKind::kWhole) return;
    PlanRequest trial = request_;
    trial.models[i].split = SplitKind::kLayers;
    if (fits_(trial, i)) out_.push_back({Label(request_, i) + "split layers", 0, 0, true});
  }

  void SuggestCheckpointing(std::size_t i) {
    const ModelRequest& m = request_.models[i];
    if (m.options.mode != RunMode::kTraining || m.options.checkpointing ||
        m.spec.family == ModelFamily::kResNet50)
      return;
    ModelRequest changed = m;
    changed.options.checkpointing = true;
    Consider(i, "checkpointing full", changed);
  }

  // The largest batch that fits, by bisection (feasibility falls as the batch grows).
  void SuggestLargestBatch(std::size_t i) {
    const ModelRequest& m = request_.models[i];
    if (m.options.batch <= 1) return;
    std::int64_t lo = 0;
    std::int64_t hi = m.options.batch - 1;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      PlanRequest trial = request_;
      trial.models[i].options.batch = mid;
      if (fits_(trial, i)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    ModelRequest changed = m;
    changed.options.batch = lo > 0 ? lo : m.options.batch / 2;
    Consider(i, "batch " + std::to_string(changed.options.batch), changed);
  }

  // More devices like the largest one: the fewest that make it fit, doubling then bisecting.
  void SuggestMoreDevices() {
    if (request_.devices.empty()) return;
    DeviceSpec largest = request_.devices.front();
    for (const DeviceSpec& d : request_.devices) {
      if (d.usable_bytes() > largest.usable_bytes()) largest = d;
    }
    const auto with_extra = [&](std::size_t extra) {
      PlanRequest trial = request_;
      for (std::size_t k = 0; k < extra; ++k) {
        DeviceSpec d = largest;
        d.name = "extra" + std::to_string(k);
        trial.devices.push_back(d);
      }
      return trial;
    };
    const std::size_t limit = ExtraDevicesAllowed();
    if (limit == 0) return;
    std::size_t hi = 1;
    while (hi < limit && !fits_(with_extra(hi), std::nullopt)) hi = std::min(hi * 2, limit);
    if (!fits_(with_extra(hi), std::nullopt)) return;
    std::size_t lo = hi / 2 + 1;
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (fits_(with_extra(mid), std::nullopt)) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    out_.push_back({std::to_string(hi) + " more device(s) of " + FormatBytes(largest.capacity_bytes), 0,
                    hi * largest.usable_bytes(), true});
  }

  std::vector<FitSuggestion> Take() { return std::move(out_); }

 private:
  // Up to 4,096 more devices, within the plan limits (limits.h) a request may not pass.
  std::size_t ExtraDevicesAllowed() const {
    const std::size_t n = request_.devices.size();
    std::size_t most =
        std::min(kMaxDevices, kMaxDeviceModelPairs / std::max<std::size_t>(1, request_.models.size()));
    for (const ModelRequest& m : request_.models) {
      if (m.pipeline) most = std::min(most, kMaxPipelineStages);
    }
    return most > n ? std::min<std::size_t>(4096, most - n) : 0;
  }

  const PlanRequest& request_;
  const FitsFunction& fits_;
  std::vector<FitSuggestion> out_;
};

// The kAdvisedModels largest models (by ModelBytes; ties to the lower index), in index order.
std::vector<std::size_t> AdvisedModels(const PlanRequest& request) {
  std::vector<std::uint64_t> bytes(request.models.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = ModelBytes(request.models[i]);
  std::vector<std::size_t> order(bytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return bytes[a] > bytes[b]; });
  if (order.size() > kAdvisedModels) order.resize(kAdvisedModels);
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

std::vector<FitSuggestion> SuggestFits(const PlanRequest& request, const FitsFunction& fits) {
  Advisor advisor(request, fits);
  for (std::size_t i : AdvisedModels(request)) {
    advisor.SuggestPrecisions(i);
    advisor.SuggestLayerSplit(i);
    advisor.SuggestCheckpointing(i);
    advisor.SuggestLargestBatch(i);
  }
  advisor.SuggestMoreDevices();
  return advisor.Take();
}

}  // namespace memcoord::planner
