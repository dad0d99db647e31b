#!/usr/bin/env bash
# instructions_per_op.sh: instructions per CachingPool::allocate and ::deallocate of pool_bench benchmarks,
# counted by valgrind's callgrind (Debian package valgrind), for one or more pool_bench builds. Unlike times,
# the counts do not move with the machine's load, so two builds compare exactly on a shared machine.
# Each benchmark runs twice (--benchmark_min_time 0.02 and 0.3); the difference of the inclusive counts
# over the difference of the calls leaves out set-up and the first (missing) allocation.
#   bench/allocator/instructions_per_op.sh POOL_BENCH [POOL_BENCH...] [-- FILTER...]
# FILTER defaults to the cache-hit benchmarks and SteadyLoop (anchored regexes, one benchmark each).
set -euo pipefail
bins=()
while [[ $# -gt 0 && $1 != -- ]]; do
  bins+=("$1")
  shift
done
[[ $# -gt 0 ]] && shift
filters=("$@")
if [[ ${#bins[@]} -eq 0 ]]; then
  sed -n '2,8p' "$0" >&2
  exit 2
fi
if [[ ${#filters[@]} -eq 0 ]]; then
  filters=('CacheHitPair/512$' 'CacheHitPair/1048576$' 'CacheHitPair/67108864$' 'CacheHitPairWorkerPool/512$'
    'CacheHitPairWorkerPool/1048576$' 'SteadyLoop$')
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for filter in "${filters[@]}"; do
  for bin in "${bins[@]}"; do
    for t in 0.02 0.3; do
      valgrind --tool=callgrind --callgrind-out-file="$dir/cg" "$bin" --benchmark_filter="$filter" \
        --benchmark_min_time="$t" >/dev/null 2>&1
      callgrind_annotate --inclusive=yes --tree=caller "$dir/cg" >"$dir/$t.txt" 2>/dev/null
    done
    python3 - "$dir" "$filter" "$bin" <<'PY'
import re, sys
folder, name, binary = sys.argv[1:4]
def read(path):
    text = open(path).read()
    out = {}
    for fn in ("allocate", "deallocate"):
        m = re.search(r"^\s*([\d,]+) \([^)]*\)\s+\*\s+\S*memcoord::CachingPool::" + fn + r"\(", text, re.M)
        callers = text[:m.start()].rsplit("\n\n", 1)[-1]
        calls = sum(int(c.replace(",", "")) for c in re.findall(r"\(([\d,]+)x\)", callers))
        out[fn] = (int(m.group(1).replace(",", "")), calls)
    return out
a, b = read(f"{folder}/0.02.txt"), read(f"{folder}/0.3.txt")
per = {fn: (b[fn][0] - a[fn][0]) / (b[fn][1] - a[fn][1]) for fn in a}
print(f"{name:34s} {per['allocate']:8.1f} + {per['deallocate']:7.1f} = {sum(per.values()):8.1f} instructions "
      f"per allocate + deallocate  {binary}")
PY
  done
done
