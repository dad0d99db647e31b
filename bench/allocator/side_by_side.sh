#!/usr/bin/env bash
# side_by_side.sh: two pool_bench builds (e.g. one built from an older commit in a temporary worktree, and
# the current one) compared in one session. On a shared machine one run of each is noise; this interleaves
# ROUNDS rounds of OLD then NEW, each run --benchmark_repetitions=5 (its median), and prints per benchmark
# the median over rounds of those medians, wall clock and thread CPU time (CPU time leaves out the time
# the thread was not running, so it is the figure to trust on an oversubscribed machine), and the least
# CPU median of any round (other load only ever adds time, so the minimum is the least disturbed figure).
#   bench/allocator/side_by_side.sh OLD_POOL_BENCH NEW_POOL_BENCH [ROUNDS=5] [FILTER='CacheHit|Steady']
# Prints one table; the per-round CPU medians follow each row so the spread is visible.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,9p' "$0" >&2
  exit 2
fi
old=$1 new=$2 rounds=${3:-5} filter=${4:-'CacheHit|Steady'}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for ((i = 1; i <= rounds; ++i)); do
  for side in old new; do
    bin=$old
    [[ $side == new ]] && bin=$new
    "$bin" --benchmark_filter="$filter" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
      --benchmark_format=json >"$dir/$side-$i.json" 2>/dev/null
  done
done
python3 - "$dir" "$rounds" <<'PY'
import json, statistics, sys
folder, rounds = sys.argv[1], int(sys.argv[2])
rows = {}
for side in ("old", "new"):
    for i in range(1, rounds + 1):
        for b in json.load(open(f"{folder}/{side}-{i}.json"))["benchmarks"]:
            if b.get("aggregate_name") == "median":
                rows.setdefault(b["run_name"], {}).setdefault(side, []).append(b)
print(f"{'benchmark (median of ' + str(rounds) + ' rounds)':44s} {'old wall':>9s} {'new wall':>9s} "
      f"{'old cpu':>9s} {'new cpu':>9s} {'new/old cpu':>11s} {'old min':>8s} {'new min':>8s}  unit")
for name, sides in rows.items():
    if "old" not in sides or "new" not in sides:
        print(f"{name:44s} only in {'new' if 'new' in sides else 'old'}")
        continue
    med = {s: (statistics.median(b["real_time"] for b in sides[s]),
               statistics.median(b["cpu_time"] for b in sides[s])) for s in ("old", "new")}
    spread = {s: [round(b["cpu_time"], 1) for b in sides[s]] for s in ("old", "new")}
    print(f"{name:44s} {med['old'][0]:9.1f} {med['new'][0]:9.1f} {med['old'][1]:9.1f} {med['new'][1]:9.1f} "
          f"{med['new'][1] / med['old'][1]:11.3f} {min(spread['old']):8.1f} {min(spread['new']):8.1f}  "
          f"{sides['new'][0]['time_unit']}  "
          f"cpu per round: old {spread['old']} new {spread['new']}")
PY
