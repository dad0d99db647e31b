// Prometheus text exposition (format 0.0.4) of a ClusterView, in the conventions of NVIDIA's dcgm-exporter:
// one series per GPU-holding process labelled with where it runs (`rank`, `local_rank`, `host`, `gpu`,
// `gpu_uuid`), pools and tags as further labels, bytes as `_bytes` gauges, monotonic counts as `_total`
// counters, latencies as a `_seconds` histogram. The README lists every family and its labels.
//
// Label values are escaped as the format requires (backslash, double quote, newline), so a host or tag
// name can never break the exposition. Pure function of its input; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "coordinator/service/cluster_types.h"

namespace memcoord::coordinator {

// The metrics text for `view` (every family has HELP and TYPE lines, even with no series).
std::string RenderPrometheus(const ClusterView& view);

// `value` escaped for use between the double quotes of a label value.
std::string EscapeLabelValue(std::string_view value);

}  // namespace memcoord::coordinator
