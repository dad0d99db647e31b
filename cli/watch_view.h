// The screen of `memcoord status --watch`: one line per rank with a memory bar (allocated, cached, device
// free, limit), then the latest events (trims, quota moves, OOMs, deaths; coordinator/http/cluster_events.h)
// and leak alerts, laid out for a `width` x `height` terminal. Ranks go into as many columns as the width
// allows (64 ranks fit a 160 x 50 terminal in two columns). Every line ends with "erase to end of line" and
// the screen with "erase below", so redrawing from the top left over the previous screen never flickers.
#pragma once

#include <deque>
#include <string>

#include "coordinator/http/cluster_events.h"
#include "coordinator/service/cluster_types.h"

namespace memcoord::cli {

std::string RenderWatchScreen(const coordinator::ClusterView& view,
                              const std::deque<coordinator::ClusterEvent>& events, int width, int height);

}  // namespace memcoord::cli
