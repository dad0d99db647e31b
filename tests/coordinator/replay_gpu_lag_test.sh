#!/bin/sh
# replay_gpu_lag_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay --gpu-lag` (see CMakeLists.txt).
set -eu
memcoord=$1 python=$2 trace=$3
# mark_waits:on: packing at the high-water mark waits for markers the lagging device has not passed.
"$memcoord" replay "$trace" --repeat 1 --gpu-lag 1000 --alloc-conf mark_waits:on --json | "$python" -c '
import json, sys
d = json.load(sys.stdin)
d = d[0] if isinstance(d, list) else d
assert d["gpu_lag_events"] == 1000, d
assert d["pack_waits"] > 0 and d["waited_events"] > 0, d
assert d["pack_stream_syncs"] == 0, d
assert d["ratio"] < 1.01, d
print("replay --gpu-lag 1000, mark_waits:on: ratio %.4f, %d packing waits" % (d["ratio"], d["pack_waits"]))
'
# The default (mark_waits off) packs only idle chunks at the mark: no wait on this trace, the same bound.
"$memcoord" replay "$trace" --repeat 1 --gpu-lag 1000 --json | "$python" -c '
import json, sys
d = json.load(sys.stdin)
d = d[0] if isinstance(d, list) else d
assert d["gpu_lag_events"] == 1000, d
assert d["pack_waits"] == 0 and d["pack_stream_syncs"] == 0, d
assert d["ratio"] < 1.01, d
print("replay --gpu-lag 1000, default: ratio %.4f, no packing wait" % d["ratio"])
'
if out=$("$memcoord" replay "$trace" --gpu-lag soon 2>&1); then
  echo "FAIL: --gpu-lag soon was accepted"; exit 1
fi
echo "$out" | grep -q -- "--gpu-lag" || { echo "FAIL: the error does not name --gpu-lag: $out"; exit 1; }
echo "ok"
