#include "coordinator/planner/model_packing.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <queue>

#include "common/bytes.h"

namespace memcoord::planner {
namespace {

// Bounds the exact search on adversarial inputs (many unequal devices); past it the best found is kept.
constexpr std::uint64_t kNodeBudget = 2'000'000;

// The exact search runs over `devices` (indices into capacities/loads, ascending) only; see Candidates.
struct Search {
  const std::vector<std::uint64_t>& items;  // sorted descending
  const std::vector<std::uint64_t>& capacities;
  const std::vector<std::size_t>& devices;
  std::vector<std::uint64_t> loads;
  std::vector<std::size_t> device_of;
  std::uint64_t best = UINT64_MAX;
  std::vector<std::size_t> best_device_of;
  std::uint64_t lower_bound = 0;
  std::uint64_t nodes = 0;

  bool Done() const { return best == lower_bound || nodes >= kNodeBudget; }  // cannot do better, or budget

  void Run(std::size_t i, std::uint64_t current_max) {
    if (Done()) return;
    ++nodes;
    if (i == items.size()) {
      if (current_max < best) {
        best = current_max;
        best_device_of = device_of;
      }
      return;
    }
    for (std::size_t a = 0; a < devices.size() && !Done(); ++a) {
      const std::size_t j = devices[a];
      // Devices with the same capacity and load are interchangeable: try the first only.
      bool seen = false;
      for (std::size_t b = 0; b < a && !seen; ++b)
        seen = capacities[devices[b]] == capacities[j] && loads[devices[b]] == loads[j];
      if (seen) continue;
      const std::uint64_t load = loads[j] + items[i];
      if (load > capacities[j] || std::max(current_max, load) >= best) continue;
      loads[j] = load;
      device_of[i] = j;
      Run(i + 1, std::max(current_max, load));
      loads[j] -= items[i];
    }
  }
};

// The devices the exact search needs to try, in ascending index order. k items use at most k devices, and
// a device B dominated by k others (each with base load <= B's and capacity >= B's; ties broken by index)
// always has one of them unused, which holds B's items within capacity at no higher load; so some
// optimal packing uses candidates only. Without base loads these are the k largest devices: 12 of
// 65,536, which makes each search node cost O(k^2) instead of O(devices^2). O(devices log k).
std::vector<std::size_t> Candidates(const std::vector<std::uint64_t>& capacities,
                                    const std::vector<std::uint64_t>& base, std::size_t k) {
  std::vector<std::size_t> order(capacities.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (base[a] != base[b]) return base[a] < base[b];
    if (capacities[a] != capacities[b]) return capacities[a] > capacities[b];
    return a < b;
  });
  // The k largest capacities among the devices before the current one in `order` (a min-heap).
  std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>> largest;
  std::vector<std::size_t> out;
  for (std::size_t j : order) {
    if (largest.size() < k || largest.top() < capacities[j]) out.push_back(j);
    largest.push(capacities[j]);
    if (largest.size() > k) largest.pop();
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t MaxOf(const std::vector<std::uint64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

// Bounds the improvement on large instances: each round's scan for the busiest device and each device or
// item a move or swap considers is one step. Cut short, the packing stays valid, only less balanced.
constexpr std::uint64_t kImproveSteps = std::uint64_t{1} << 22;

// Each device's items in ascending index order, kept in step with device_of.
class ItemsOnDevices {
 public:
  ItemsOnDevices(const std::vector<std::size_t>& device_of, std::size_t devices) : on_(devices) {
    for (std::size_t i = 0; i < device_of.size(); ++i) on_[device_of[i]].push_back(i);
  }
  const std::vector<std::size_t>& on(std::size_t device) const { return on_[device]; }
  void Move(std::size_t item, std::size_t from, std::size_t to) {
    std::vector<std::size_t>& a = on_[from];
    a.erase(std::lower_bound(a.begin(), a.end(), item));
    std::vector<std::size_t>& b = on_[to];
    b.insert(std::lower_bound(b.begin(), b.end(), item), item);
  }

 private:
  std::vector<std::vector<std::size_t>> on_;
};

// Moves and swaps off the busiest device, each lowering it, until neither helps (or kImproveSteps): an
// item of the busiest device (lowest index first) moves to the first device where it fits below the peak,
// else swaps with a smaller item there.
void Improve(const std::vector<std::uint64_t>& items, const std::vector<std::uint64_t>& capacities,
             std::vector<std::uint64_t>& loads, std::vector<std::size_t>& device_of) {
  ItemsOnDevices devices(device_of, capacities.size());
  std::uint64_t steps = 0;
  for (int round = 0; round < 10000 && steps < kImproveSteps; ++round) {
    steps += capacities.size();
    const std::size_t busy =
        static_cast<std::size_t>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    const std::uint64_t peak = loads[busy];
    bool improved = false;
    for (std::size_t a = 0; a < devices.on(busy).size() && !improved; ++a) {
      const std::size_t i = devices.on(busy)[a];
      for (std::size_t j = 0; j < capacities.size() && !improved && steps < kImproveSteps; ++j) {
        if (j == busy) continue;
        ++steps;
        if (loads[j] + items[i] <= capacities[j] && loads[j] + items[i] < peak) {  // move
          loads[busy] -= items[i];
          loads[j] += items[i];
          device_of[i] = j;
          devices.Move(i, busy, j);
          improved = true;
          break;
        }
        for (std::size_t k : devices.on(j)) {  // swap i with a smaller k on device j
          ++steps;
          if (items[k] >= items[i]) continue;
          const std::uint64_t new_j = loads[j] - items[k] + items[i];
          if (new_j > capacities[j] || new_j >= peak) continue;
          loads[busy] = loads[busy] - items[i] + items[k];
          loads[j] = new_j;
          device_of[i] = j;
          device_of[k] = busy;
          devices.Move(i, busy, j);
          devices.Move(k, j, busy);
          improved = true;
          break;
        }
      }
    }
    if (!improved) break;
  }
}

// Longest processing time first, then Improve.
bool Heuristic(const std::vector<std::uint64_t>& items, const std::vector<std::size_t>& order,
               const std::vector<std::uint64_t>& capacities, std::vector<std::uint64_t>& loads,
               std::vector<std::size_t>& device_of) {
  for (std::size_t i : order) {
    std::size_t pick = capacities.size();
    for (std::size_t j = 0; j < capacities.size(); ++j) {
      if (loads[j] + items[i] > capacities[j]) continue;
      if (pick == capacities.size() || loads[j] < loads[pick]) pick = j;
    }
    if (pick == capacities.size()) return false;
    device_of[i] = pick;
    loads[pick] += items[i];
  }
  Improve(items, capacities, loads, device_of);
  return true;
}

}  // namespace

Result<Packing> PackWhole(const std::vector<std::uint64_t>& items,
                          const std::vector<std::uint64_t>& capacities,
                          const std::vector<std::uint64_t>& base_loads) {
  if (capacities.empty()) return InvalidArgument("no devices to pack onto");
  std::vector<std::uint64_t> base(capacities.size(), 0);
  for (std::size_t j = 0; j < base_loads.size() && j < base.size(); ++j) base[j] = base_loads[j];
  const std::uint64_t largest_room = [&] {
    std::uint64_t r = 0;
    for (std::size_t j = 0; j < capacities.size(); ++j)
      r = std::max(r, capacities[j] > base[j] ? capacities[j] - base[j] : 0);
    return r;
  }();
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i] > largest_room) {
      return ResourceExhausted("item " + std::to_string(i) + " needs " + FormatBytes(items[i]) +
                               " but the largest free device has " + FormatBytes(largest_room));
    }
  }
  std::vector<std::size_t> order(items.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return items[a] > items[b]; });

  Packing packing;
  packing.device_of.assign(items.size(), 0);
  std::vector<std::uint64_t> loads = base;
  const bool heuristic_ok = Heuristic(items, order, capacities, loads, packing.device_of);

  if (items.size() <= kExactPackingItems) {
    std::vector<std::uint64_t> sorted(items.size());
    for (std::size_t r = 0; r < order.size(); ++r) sorted[r] = items[order[r]];
    const std::vector<std::size_t> candidates = Candidates(capacities, base, items.size());
    Search search{sorted,     capacities, candidates, base, std::vector<std::size_t>(items.size(), 0),
                  UINT64_MAX, {},         0,          0};
    std::uint64_t total = 0;
    for (std::uint64_t w : items) total += w;
    for (std::uint64_t b : base) total += b;
    search.lower_bound = std::max(MaxOf(base), sorted.empty() ? 0 : sorted[0]);
    search.lower_bound = std::max(search.lower_bound, (total + capacities.size() - 1) / capacities.size());
    if (heuristic_ok) search.best = MaxOf(loads) + 1;  // find anything at least as good as the heuristic
    search.Run(0, MaxOf(base));
    if (!search.best_device_of.empty() || items.empty()) {
      if (!items.empty()) {
        for (std::size_t r = 0; r < order.size(); ++r) packing.device_of[order[r]] = search.best_device_of[r];
      }
      loads = base;
      for (std::size_t i = 0; i < items.size(); ++i) loads[packing.device_of[i]] += items[i];
      packing.exact = search.nodes < kNodeBudget;
    } else if (!heuristic_ok) {
      return ResourceExhausted("no assignment of the " + std::to_string(items.size()) + " items fits the " +
                               std::to_string(capacities.size()) + " devices");
    } else {
      packing.exact = search.nodes < kNodeBudget;  // proved nothing beats the heuristic's result
    }
  } else if (!heuristic_ok) {
    return ResourceExhausted("no assignment found for the " + std::to_string(items.size()) +
                             " items on the " + std::to_string(capacities.size()) +
                             " devices (largest-first packing failed)");
  }
  packing.loads = loads;
  packing.bottleneck_bytes = MaxOf(loads);
  return packing;
}

}  // namespace memcoord::planner
