// Draws memory timelines of a trace replay (allocator/trace_timeline.h) as one standalone SVG: the
// requested bytes of the trace (from the first timeline) and the reserved bytes of each replay, over the
// event number, with axes, a legend and each series' peak. Plain SVG 1.1 with no script or external
// reference, so browsers, rsvg-convert and Chromium's headless screenshot all render it alike.
#pragma once

#include <string>
#include <vector>

#include "allocator/trace_timeline.h"

namespace memcoord::cli {

// REQUIRES: !timelines.empty().
std::string TimelineSvg(const std::vector<TraceTimeline>& timelines, const std::string& title);

}  // namespace memcoord::cli
