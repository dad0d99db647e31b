#include "coordinator/http/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace memcoord::coordinator {
namespace {

using Label = std::pair<const char*, std::string>;

// Appends families and samples to one string. A family's HELP/TYPE come once, before its samples.
class Exposition {
 public:
  void family(const char* name, const char* type, const char* help) {
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  // `labels`: rendered already (LabelText), without braces; empty: none.
  template <typename Value>
  void sample(std::string_view name, std::string_view labels, Value value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      out_ += labels;
      out_ += '}';
    }
    out_ += ' ';
    out_ += FormatValue(value);
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  static std::string FormatValue(std::uint64_t v) { return std::to_string(v); }
  static std::string FormatValue(std::int64_t v) { return std::to_string(v); }
  static std::string FormatValue(int v) { return std::to_string(v); }
  static std::string FormatValue(double v) {
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    if (std::isnan(v)) return "NaN";
    return fmt::format("{}", v);
  }
  std::string out_;
};

// `name="value"` pairs, values escaped, comma-separated: rendered once and reused for every family, since a
// scrape of 1,024 ranks writes ~40,000 samples.
std::string LabelText(std::initializer_list<Label> labels, std::string base = "") {
  for (const Label& l : labels) {
    if (!base.empty()) base += ',';
    base += l.first;
    base += "=\"";
    base += EscapeLabelValue(l.second);
    base += '"';
  }
  return base;
}

// Where a worker runs, as dcgm-exporter labels a GPU (its `gpu`, `UUID`, `Hostname`), plus the rank.
std::string WorkerLabels(const WorkerRecord& w) {
  return LabelText({{"rank", std::to_string(w.id.rank)},
                    {"local_rank", std::to_string(w.id.local_rank)},
                    {"host", w.id.host},
                    {"gpu", std::to_string(w.id.device)},
                    {"gpu_uuid", w.id.device_uuid}});
}

std::string With(const std::string& labels, std::initializer_list<Label> more) {
  return LabelText(more, labels);
}

void RenderWorkers(const ClusterView& view, const std::vector<std::string>& labels, Exposition& x) {
  x.family("memcoord_worker_live", "gauge",
           "1 while a worker holds the rank (live or suspect: a stall is not a death), 0 once it is dead");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    x.sample("memcoord_worker_live", labels[i], HoldsRank(w.state) ? 1 : 0);
  }
  x.family("memcoord_worker_state", "gauge",
           "1 for the worker's liveness state (live, suspect: missed reports, dead), 0 for the others");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    for (WorkerState s : {WorkerState::kLive, WorkerState::kSuspect, WorkerState::kDead}) {
      x.sample("memcoord_worker_state", With(labels[i], {{"state", StateName(s)}}), w.state == s ? 1 : 0);
    }
  }
  x.family("memcoord_worker_step", "gauge", "last training step the worker completed");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    x.sample("memcoord_worker_step", labels[i], view.workers[i].step);
  }
  x.family("memcoord_worker_last_report_age_seconds", "gauge", "time since the worker's last report");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    x.sample("memcoord_worker_last_report_age_seconds", labels[i],
             static_cast<double>(w.last_report_age_ms) / 1e3);
  }
}

// Device memory as the worker measured it, next to dcgm-exporter's DCGM_FI_DEV_FB_USED / FB_FREE (which
// are MiB; these are bytes).
void RenderDevices(const ClusterView& view, const std::vector<std::string>& labels, Exposition& x) {
  x.family("memcoord_device_memory_used_bytes", "gauge",
           "device memory in use by every process (total - free; compare DCGM_FI_DEV_FB_USED, in MiB)");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    if (w.id.device_total_bytes == 0) continue;
    const std::uint64_t free = std::min(w.device_free_bytes, w.id.device_total_bytes);
    x.sample("memcoord_device_memory_used_bytes", labels[i], w.id.device_total_bytes - free);
  }
  x.family("memcoord_device_memory_free_bytes", "gauge",
           "device memory free as the worker last measured it (compare DCGM_FI_DEV_FB_FREE, in MiB)");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    if (w.id.device_total_bytes == 0) continue;
    x.sample("memcoord_device_memory_free_bytes", labels[i], w.device_free_bytes);
  }
  x.family("memcoord_device_memory_total_bytes", "gauge", "device memory in total");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    if (w.id.device_total_bytes == 0) continue;
    x.sample("memcoord_device_memory_total_bytes", labels[i], w.id.device_total_bytes);
  }
  x.family("memcoord_device_budget_bytes", "gauge", "memory budget of the worker's device (0: none set)");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    x.sample("memcoord_device_budget_bytes", labels[i], w.device_budget_bytes);
  }
}

void RenderPools(const ClusterView& view, const std::vector<std::string>& labels, Exposition& x) {
  struct Field {
    const char* name;
    const char* type;
    const char* help;
    std::uint64_t PoolUsage::*field;
  };
  static constexpr Field kFields[] = {
      {"memcoord_pool_allocated_bytes", "gauge", "bytes in live blocks", &PoolUsage::allocated_bytes},
      {"memcoord_pool_reserved_bytes", "gauge", "bytes the pool holds from the device (allocated + cached)",
       &PoolUsage::reserved_bytes},
      {"memcoord_pool_peak_allocated_bytes", "gauge", "peak of allocated bytes",
       &PoolUsage::peak_allocated_bytes},
      {"memcoord_pool_peak_reserved_bytes", "gauge", "peak of reserved bytes",
       &PoolUsage::peak_reserved_bytes},
      {"memcoord_pool_limit_bytes", "gauge", "the pool's quota (0: none)", &PoolUsage::limit_bytes},
      {"memcoord_pool_largest_free_bytes", "gauge", "largest block the pool can hand out without the driver",
       &PoolUsage::largest_free_bytes},
      {"memcoord_trims_total", "counter", "cache trims the pool performed", &PoolUsage::trims},
      {"memcoord_trimmed_bytes_total", "counter", "bytes the pool's trims released to the device",
       &PoolUsage::trimmed_bytes},
      {"memcoord_ooms_total", "counter", "allocations that failed for lack of memory", &PoolUsage::ooms},
      {"memcoord_driver_map_calls_total", "counter",
       "driver calls that mapped memory into the pool (map calls, or segment allocations)",
       &PoolUsage::driver_map_calls},
      {"memcoord_driver_unmap_calls_total", "counter",
       "driver calls that gave memory back (unmap calls, or segment releases)",
       &PoolUsage::driver_unmap_calls},
      {"memcoord_allocations_total", "counter", "successful allocations", &PoolUsage::allocations},
      {"memcoord_cache_hits_total", "counter", "allocations served from the cache (no driver call)",
       &PoolUsage::cache_hits},
  };
  // Labels of every (worker, pool), rendered once for the 14 per-pool families.
  std::vector<std::vector<std::string>> pool_labels(view.workers.size());
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    for (const PoolUsage& p : view.workers[i].pools)
      pool_labels[i].push_back(With(labels[i], {{"pool", p.name}}));
  }
  for (const Field& f : kFields) {
    x.family(f.name, f.type, f.help);
    for (std::size_t i = 0; i < view.workers.size(); ++i) {
      const WorkerRecord& w = view.workers[i];
      for (std::size_t j = 0; j < w.pools.size(); ++j)
        x.sample(f.name, pool_labels[i][j], w.pools[j].*(f.field));
    }
  }
  x.family("memcoord_pool_cached_bytes", "gauge", "reserved but not allocated: what a trim could release");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    for (std::size_t j = 0; j < w.pools.size(); ++j) {
      const PoolUsage& p = w.pools[j];
      const std::uint64_t cached =
          p.reserved_bytes > p.allocated_bytes ? p.reserved_bytes - p.allocated_bytes : 0;
      x.sample("memcoord_pool_cached_bytes", pool_labels[i][j], cached);
    }
  }
  x.family("memcoord_tag_live_bytes", "gauge", "bytes in live blocks allocated under a tag");
  for (std::size_t i = 0; i < view.workers.size(); ++i) {
    const WorkerRecord& w = view.workers[i];
    for (std::size_t j = 0; j < w.pools.size(); ++j) {
      for (const TagBytes& t : w.pools[j].tags) {
        x.sample("memcoord_tag_live_bytes", With(pool_labels[i][j], {{"tag", t.tag}}), t.live_bytes);
      }
    }
  }
}

void RenderCoordinator(const ClusterView& view, Exposition& x) {
  x.family("memcoord_leak_bytes_per_step", "gauge", "steady growth of live bytes per step in a pool and tag");
  for (const LeakAlert& l : view.leaks) {
    x.sample("memcoord_leak_bytes_per_step",
             LabelText({{"rank", std::to_string(l.rank)}, {"pool", l.pool}, {"tag", l.tag}}),
             l.bytes_per_step);
  }
  x.family("memcoord_reports_total", "counter", "worker reports the coordinator handled");
  x.sample("memcoord_reports_total", "", view.stats.reports);
  x.family("memcoord_report_handling_p99_seconds", "gauge", "p99 time to handle one report (recent reports)");
  x.sample("memcoord_report_handling_p99_seconds", "", view.stats.report_handling_p99_us / 1e6);
  x.family("memcoord_live_sessions", "gauge", "attached worker sessions");
  x.sample("memcoord_live_sessions", "", view.stats.live_sessions);
  x.family("memcoord_uptime_seconds", "gauge", "time since the coordinator started");
  x.sample("memcoord_uptime_seconds", "", static_cast<double>(view.stats.uptime_ms) / 1e3);

  const HistogramView& h = view.stats.trim_fanout;
  x.family("memcoord_trim_fanout_seconds", "histogram",
           "trim fan-out: command sent to the last rank's ack (at step S: first ack to last ack)");
  for (std::size_t i = 0; i < h.bounds_s.size() && i < h.counts.size(); ++i) {
    x.sample("memcoord_trim_fanout_seconds_bucket", LabelText({{"le", fmt::format("{}", h.bounds_s[i])}}),
             h.counts[i]);
  }
  x.sample("memcoord_trim_fanout_seconds_bucket", R"(le="+Inf")", h.count);
  x.sample("memcoord_trim_fanout_seconds_sum", "", h.sum_s);
  x.sample("memcoord_trim_fanout_seconds_count", "", h.count);
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string RenderPrometheus(const ClusterView& view) {
  Exposition x;
  std::vector<std::string> labels;
  labels.reserve(view.workers.size());
  for (const WorkerRecord& w : view.workers) labels.push_back(WorkerLabels(w));
  RenderWorkers(view, labels, x);
  RenderDevices(view, labels, x);
  RenderPools(view, labels, x);
  RenderCoordinator(view, x);
  return x.take();
}

}  // namespace memcoord::coordinator
