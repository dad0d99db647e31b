#!/bin/sh
# replay_h200_threads_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay` of the alternating pair's trace recorded
# with its two threads on the H200 (bench/traces/alternating_threads.trace.gz, see CMakeLists.txt). Recording
# turns the pool's thread caches off, so the traced run mapped a 56 MiB small-block arena; the same workload
# untraced mapped 60 MiB (small) and 15,262 MiB (large). Replayed with its threads and the default thread
# caches, the trace must map no more than the untraced run did; with thread_cache:0, no more than the traced
# run's small arena. The figures are one-sided: a pool that maps less passes.
set -eu
memcoord=$1 python=$2 trace=$3
default=$("$memcoord" replay "$trace" --repeat 1 --json)
uncached=$("$memcoord" replay "$trace" --repeat 1 --json --alloc-conf thread_cache:0)
"$python" -c '
import json, sys
MIB = 1 << 20
default, uncached = (json.loads(a) for a in sys.argv[1:3])
assert (default["threads"], default["trace_threads"]) == (2, 2), default
small, large = default["small_arena_bytes"], default["large_arena_bytes"]
assert small <= 60 * MIB and large <= 15262 * MIB, ("more than the untraced H200 run (60 + 15,262 MiB)", small, large)
assert uncached["small_arena_bytes"] <= 56 * MIB, ("more than the traced H200 run (56 MiB)", uncached)
assert uncached["small_arena_bytes"] <= small, (uncached["small_arena_bytes"], small)
print("H200 alternating trace, two threads: small %d MiB + large %d MiB (the untraced run: 60 + 15,262); "
      "thread_cache:0 small %d MiB (the traced run: 56)" % (small // MIB, large // MIB,
                                                          uncached["small_arena_bytes"] // MIB))
' "$default" "$uncached"
echo "ok"
