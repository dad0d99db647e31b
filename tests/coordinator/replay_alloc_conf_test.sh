#!/bin/sh
# replay_alloc_conf_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay --alloc-conf` (see CMakeLists.txt).
set -eu
memcoord=$1 python=$2 trace=$3
default=$("$memcoord" replay "$trace" --repeat 1 --json)
coarse=$("$memcoord" replay "$trace" --repeat 1 --json --alloc-conf ' large_map_unit:80MiB, thread_cache:0')
"$python" -c '
import json, sys
default, coarse = (json.loads(a) for a in sys.argv[1:3])
assert default["alloc_conf"] == "", default
assert coarse["alloc_conf"] == " large_map_unit:80MiB, thread_cache:0", coarse
assert coarse["maps"] < default["maps"], (coarse["maps"], default["maps"])
print("replay --alloc-conf large_map_unit:80MiB: %d maps against %d by default" % (coarse["maps"], default["maps"]))
' "$default" "$coarse"
for bad in "large_map_unit" "thread_cache:lots" "expandable_segments:True" "remap:never"; do
  if out=$("$memcoord" replay "$trace" --repeat 1 --alloc-conf "$bad" 2>&1); then
    echo "FAIL: --alloc-conf '$bad' was accepted"; exit 1
  fi
  echo "$out" | grep -q -- "--alloc-conf: alloc conf entry '$bad'" ||
    { echo "FAIL: the error does not name the flag and the entry: $out"; exit 1; }
done
echo "ok"
