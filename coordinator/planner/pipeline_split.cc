#include "coordinator/planner/pipeline_split.h"

#include <algorithm>
#include <limits>

#include "common/bytes.h"

namespace memcoord::planner {
namespace {

// The first unit stage `stage` may take so that it ends at `end` (exclusive) within `limit`, leaving
// `reserve` units before it for the earlier stages; `end` when not even one unit fits.
std::size_t LongestRunBack(std::size_t end, std::size_t reserve, std::size_t stage, std::uint64_t limit,
                           const StageLoadFunction& load) {
  std::size_t lo = reserve;  // the earliest start allowed
  if (end <= lo) return end;
  if (load(lo, end - 1, stage) <= limit) return lo;
  std::size_t hi = end;  // known to fit (an empty run); invariant: start lo does not fit
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (load(mid, end - 1, stage) <= limit) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

// Fills the stages from the last one backwards, each taking the longest run that fits: units are cheaper
// on later stages (fewer micro-batches in flight), so pushing them late never hurts an earlier stage.
bool Fill(std::size_t units, std::size_t stages, std::uint64_t bottleneck, const StageLoadFunction& load,
          const std::vector<std::uint64_t>& capacities, StageSplit* out) {
  std::vector<std::size_t> first(stages + 1, units);
  std::size_t end = units;
  for (std::size_t j = stages; j-- > 0;) {
    const std::uint64_t limit = capacities.empty() ? bottleneck : std::min(bottleneck, capacities[j]);
    const std::size_t begin = j == 0 ? 0 : LongestRunBack(end, j, j, limit, load);
    if (begin == end || load(begin, end - 1, j) > limit) return false;
    first[j] = begin;
    end = begin;
  }
  if (out != nullptr) {
    out->first = first;
    out->loads.clear();
    for (std::size_t j = 0; j < stages; ++j) out->loads.push_back(load(first[j], first[j + 1] - 1, j));
    out->bottleneck_bytes = *std::max_element(out->loads.begin(), out->loads.end());
  }
  return true;
}

std::vector<StagePeak> Peaks(const StageSplit& split, std::int64_t micro_batches,
                             const StageLoadFunction& load, const StageLoadFunction& states_only) {
  std::vector<StagePeak> out;
  const std::size_t stages = split.first.size() - 1;
  for (std::size_t j = 0; j < stages; ++j) {
    StagePeak p;
    p.first_unit = split.first[j];
    p.last_unit = split.first[j + 1] - 1;
    p.in_flight = std::max<std::int64_t>(1, std::min(static_cast<std::int64_t>(stages - j), micro_batches));
    p.bytes = load(p.first_unit, p.last_unit, j);
    p.states_only_bytes = states_only(p.first_unit, p.last_unit, j);
    out.push_back(p);
  }
  return out;
}

}  // namespace

Result<StageSplit> SplitStages(std::size_t units, std::size_t stages, const StageLoadFunction& load,
                               const std::vector<std::uint64_t>& capacities) {
  if (stages == 0 || units < stages) {
    return InvalidArgument("pipeline_stages " + std::to_string(stages) +
                           " needs at least that many units, got " + std::to_string(units) +
                           "; accepted: 1.." + std::to_string(units));
  }
  std::uint64_t hi = 0;
  for (std::size_t j = 0; j < stages; ++j) hi = std::max(hi, load(0, units - 1, j));
  std::uint64_t lo = 0;
  if (!Fill(units, stages, hi, load, capacities, nullptr)) {
    return ResourceExhausted("no split into " + std::to_string(stages) +
                             " pipeline stages fits the devices' capacities");
  }
  while (lo < hi) {  // invariant: hi is feasible
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (Fill(units, stages, mid, load, capacities, nullptr)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  StageSplit split;
  Fill(units, stages, hi, load, capacities, &split);
  return split;
}

PipelineComparison ComparePipelineSplits(std::size_t units, std::size_t stages, std::int64_t micro_batches,
                                         const StageLoadFunction& load,
                                         const StageLoadFunction& states_only) {
  PipelineComparison c;
  const Result<StageSplit> aware = SplitStages(units, stages, load);
  const Result<StageSplit> naive = SplitStages(units, stages, states_only);
  if (aware.ok()) c.aware = Peaks(*aware, micro_batches, load, states_only);
  if (naive.ok()) c.weights_only = Peaks(*naive, micro_batches, load, states_only);
  return c;
}

}  // namespace memcoord::planner
