#!/bin/sh
# replay_threads_test.sh MEMCOORD PYTHON3 TRACE: `memcoord replay` of a trace that names two threads (see
# CMakeLists.txt and the trace's own comment).
set -eu
memcoord=$1 python=$2 trace=$3
two=$("$memcoord" replay "$trace" --repeat 1 --json)
one=$("$memcoord" replay "$trace" --repeat 1 --json --one-thread)
"$python" -c '
import json, sys
two, one = (json.loads(a) for a in sys.argv[1:3])
assert (two["threads"], two["trace_threads"]) == (2, 2), two
assert (one["threads"], one["trace_threads"]) == (1, 2), one
assert two["peak_reserved_bytes"] == 4 << 20 and one["peak_reserved_bytes"] == 2 << 20, (two, one)
print("replay of two threads: 4 MiB reserved by two threads, 2 MiB by one (--one-thread)")
' "$two" "$one"
echo "ok"
