#!/bin/sh
# replay_threads_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay` of a trace that names two threads (see
# CMakeLists.txt and the trace's own comment): two threads without the thread-cache fence map a second chunk,
# one thread (--one-thread) or the fence (the default) do not.
set -eu
memcoord=$1 python=$2 trace=$3
two=$("$memcoord" replay "$trace" --repeat 1 --json --alloc-conf thread_cache_fence:off)
one=$("$memcoord" replay "$trace" --repeat 1 --json --one-thread --alloc-conf thread_cache_fence:off)
fenced=$("$memcoord" replay "$trace" --repeat 1 --json)
"$python" -c '
import json, sys
two, one, fenced = (json.loads(a) for a in sys.argv[1:4])
assert (two["threads"], two["trace_threads"]) == (2, 2), two
assert (one["threads"], one["trace_threads"]) == (1, 2), one
assert (fenced["threads"], fenced["trace_threads"]) == (2, 2), fenced
assert two["peak_reserved_bytes"] == 4 << 20 and one["peak_reserved_bytes"] == 2 << 20, (two, one)
assert fenced["peak_reserved_bytes"] == 2 << 20, fenced
print("replay of two threads: 4 MiB reserved by two threads without the fence, 2 MiB by one (--one-thread)"
      " and 2 MiB by two with the fence (the default)")
' "$two" "$one" "$fenced"
echo "ok"
