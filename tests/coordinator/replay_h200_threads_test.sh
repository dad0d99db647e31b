#!/bin/sh
# replay_h200_threads_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay` of the alternating pair's trace recorded
# with its two threads on the H200 (bench/traces/alternating_threads.trace.gz, see CMakeLists.txt). Recording
# turns the pool's thread caches off, so the traced run mapped a 56 MiB small-block arena (expandable_segments'
# figure too); the same workload untraced, before idle threads gave their caches back
# (thread_cache_idle_misses), mapped 60 MiB (small) and 15,262 MiB (large); expandable_segments reserved
# 16,059,990,016 bytes at its peak (15,316 MiB: 56 small, 15,260 large). Replayed with its threads:
#   - the defaults must peak no higher than expandable_segments (replayed: 16,059,990,016 bytes, its peak to the
#     byte, ending with 56 + 15,260 MiB, since grow_to_unit_end is the default; 16,055,795,712 with 56 + 15,256
#     MiB before, since Arena::fit ranks a block before a hole by its reach; one chunk above it, 16,062,087,168
#     with a large arena of 15,262 MiB, before that, as the H100 runs of that pool were, 16,315,842,560 bytes
#     against 16,313,745,408), and end with no more in the two arenas together than expandable_segments' pools
#     at their peak (56 + 15,260 MiB);
#   - without the idle sweep (thread_cache_idle_misses:0), no more than the untraced run did (60 + 15,262);
#   - with thread_cache:0, no more than the traced run's small arena.
# The figures are one-sided: a pool that maps less passes.
set -eu
memcoord=$1 python=$2 trace=$3
default=$("$memcoord" replay "$trace" --repeat 1 --json)
unswept=$("$memcoord" replay "$trace" --repeat 1 --json --alloc-conf thread_cache_idle_misses:0)
uncached=$("$memcoord" replay "$trace" --repeat 1 --json --alloc-conf thread_cache:0)
"$python" -c '
import json, sys
MIB = 1 << 20
default, unswept, uncached = (json.loads(a) for a in sys.argv[1:4])
assert (default["threads"], default["trace_threads"]) == (2, 2), default
assert default["idle_cache_flushes"] > 0 and unswept["idle_cache_flushes"] == 0, (default, unswept)
small, large = default["small_arena_bytes"], default["large_arena_bytes"]
assert default["peak_reserved_bytes"] <= 16059990016, ("above expandable_segments", default)
assert small + large <= (56 + 15260) * MIB, ("more than expandable_segments (56 + 15,260 MiB)", small, large)
assert unswept["small_arena_bytes"] <= 60 * MIB, ("more than the untraced H200 run (60 MiB)", unswept)
assert uncached["small_arena_bytes"] <= 56 * MIB, ("more than the traced H200 run (56 MiB)", uncached)
print("H200 alternating trace, two threads: peak %d MiB (expandable_segments: 15,316), small %d MiB + large %d "
      "MiB at the end, %d idle caches flushed; idle sweep off: small %d MiB (the untraced run before it: 60); "
      "thread_cache:0: small %d MiB" % (default["peak_reserved_bytes"] // MIB, small // MIB, large // MIB,
                                        default["idle_cache_flushes"],
                        unswept["small_arena_bytes"] // MIB, uncached["small_arena_bytes"] // MIB))
' "$default" "$unswept" "$uncached"
echo "ok"
