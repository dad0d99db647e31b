#!/usr/bin/env bash
# device_run.sh: issue 3's proof on the GPU machine, in one call. Run from the repository root there, with a
# device bundle built here (../shared/tools/device-bundle build/gpu .device-bundle) carried along:
#   bash bench/gpu/device_run.sh            (writes logs under $OUT, or ./device-out without it)
# 1. the gpu-labelled tests, 2. pool_vs_async_bench, 3. the four traces replayed on virtual, cuda-vmm and cuda,
# then a short table: ns/op against cudaMallocAsync, and peak reserved on cuda-vmm against virtual (must be
# within 1%).
set -uo pipefail
out=${OUT:-device-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.device-bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} NCCL_NVLS_ENABLE=0
bin=.device-bundle/bin
nvidia-smi -L
timeout 300 "$bin/allocator_gpu_tests" >"$out/gpu_tests.log" 2>&1
echo "allocator_gpu_tests exit $?"
grep -E '^\[ +(OK|FAILED|SKIPPED|PASSED|INFO) +\]|Failure|Expected|Which is|actual' "$out/gpu_tests.log"
timeout 240 "$bin/pool_vs_async_bench" >"$out/bench.json" 2>"$out/bench.err"
echo "pool_vs_async_bench exit $?"
: >"$out/replay.jsonl"
for trace in bench/traces/*.trace.gz; do
  for backend in virtual cuda-vmm cuda; do
    timeout 120 "$bin/memcoord" replay "$trace" --backend "$backend" --json >>"$out/replay.jsonl" 2>>"$out/replay.err" ||
      echo "replay $trace $backend failed: $(tail -1 "$out/replay.err")"
  done
done
python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
try:
    b = json.load(open(os.path.join(out, "bench.json")))
    print("bench on", b.get("device"), "-", b["pattern"]["operations"], "ops, median of", b["reps"])
    for name, r in b["results"].items():
        print(f"  {name:18s} {r['ns_per_op_median']:8.1f} ns/op  (min {r['ns_per_op_min']:.1f})  {r['facts']}")
    print("  speedup vs cudaMallocAsync:", b.get("speedup_vs_async"), "target 4x met:", b.get("target_4x_met"))
except Exception as e:
    print("bench: no result:", e, open(os.path.join(out, "bench.json")).read()[:500])
rows = {}
for line in open(os.path.join(out, "replay.jsonl")):
    j = json.loads(line)
    rows.setdefault(j["workload"], {})[j["backend"]] = j
print(f"{'trace':18s} {'peak requested':>15s} {'virtual reserved':>17s} {'cuda-vmm reserved':>18s} {'diff':>8s} {'cuda reserved':>15s} {'vmm ns/ev':>9s}")
for w, r in sorted(rows.items()):
    v, m, c = r.get("virtual"), r.get("cuda-vmm"), r.get("cuda")
    if v and m:
        d = (m["peak_reserved_bytes"] - v["peak_reserved_bytes"]) / v["peak_reserved_bytes"] * 100
        print(f"{w:18s} {v['peak_requested_bytes']:15d} {v['peak_reserved_bytes']:17d} {m['peak_reserved_bytes']:18d} "
              f"{d:7.3f}% {c['peak_reserved_bytes'] if c else -1:15d} {m['ns_per_event']:9.1f}")
    else:
        print(w, "missing:", [k for k in ("virtual", "cuda-vmm") if k not in r])
PY
