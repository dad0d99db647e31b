#!/usr/bin/env bash
# run_on_h200.sh PART...: issue 12's PyTorch runs on the GPU machine, from the repository root, over a device
# bundle built here (shared/DEVICE.md, route 1):
#   cmake --preset release -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" && cmake --build --preset release
#   ../shared/tools/device-bundle build/release .device-bundle
# then `run` with carry [".device-bundle"] and e.g. `examples/pytorch/run_on_h200.sh shim checks abort`.
# Each part fits one 10-minute call; logs go to $OUT (or /tmp). Parts:
#   shim     builds the C++ shim against the installed torch (pip --target, else a JIT build) and says so
#   checks   integration_checks.py: stats, empty_cache, record_stream, snapshot, oom, graph capture, compile, DDP
#            (CHECKS_ONLY=a,b runs those checks only)
#   abort    abort_demo.py: rank 1 SIGKILLed while rank 0 waits inside a collective, memcoord vs plain PyTorch
#            (stopped at 60 s)
#   abort_nccl  the same over NCCL with one GPU per rank (a 2-GPU machine only)
#   trim     cluster_trim.py: 2 GPT-2 processes, `memcoord trim` at one step, device free memory rises
#   train    train.py under torchrun (2 ranks, gloo) and under memcoord-launch (2 ranks, a coordinator)
#   bench1   bench_allocators.py: gpt2_fp32, gpt2_bf16_varlen, resnet50_amp x {native, expandable, memcoord},
#            3 fresh processes each, one round per place in the order, pinned to the GPU's local CPUs (324 s on
#            an H100, 2026-12-06; 407 s on another, 2026-12-05); BENCH1_WORKLOADS=a,b names others
#   bench2   bench_allocators.py: llama_1b, alternating x {native, expandable, memcoord}, 3 processes each
#            (262 s on an H100 at 48 alternating steps, 2026-12-06, the Llama built on the GPU); bench1 and bench2: BENCH_REPEAT=N runs N processes each,
#            BENCH_COLD=N adds N steps a process after torch.cuda.empty_cache() each (--cold-steps)
#   benches  bench1 and bench2 at once, each on its own GPU, when the machine has two (nvidia-h200-x2: ~460 s,
#            bench1's estimate); one after the other otherwise (two calls' worth: run bench1 and bench2 apart)
#   gtests   the bundle's GPU suites (allocator_gpu_tests, worker_c_abi_gpu_tests: cacheInfo, the C ABI on the
#            device) and capi_bench on cuda-vmm at 1 and 4 threads beside the C library's malloc/free, unpinned
#            and with each thread on its own physical core
#   firststep bench_allocators.py: gpt2_fp32, resnet50_amp, alternating x {expandable, memcoord}, 6 fresh processes
#            each in alternating order after one discarded warm-up process (the machine's cold start), pinned,
#            driver timer, each step's CPU time: the first-step target with each allocator's spread
#            between processes (~380 s: FIRSTSTEP_REPEAT=4 took 251 s on an H100, 2026-12-06); FIRSTSTEP_WORKLOADS=a,b names others,
#            FIRSTSTEP_REPEAT=N runs N processes each (a multiple of the allocators' count: each allocator as
#            often in each place of the order), FIRSTSTEP_ALLOCATORS=a,b,... others (e.g. memcoord[CONF]); several
#            runs' firststep.json pool with first_steps_pooled.py; FIRSTSTEP_STEPS=N steps a process (8: only the
#            first is this part's figure); FIRSTSTEP_COLD=N adds N steps a process after torch.cuda.empty_cache()
#            each (bench_allocators.py --cold-steps: re-growth without a first step's one-time work)
#   firstprof profile_first_step.py: the first step under torch.profiler and cProfile, expandable and memcoord in
#            turns, 2 processes each (FIRSTPROF_WORKLOAD, llama_1b by default: 60 s on an H100; FIRSTPROF_ROUNDS=N
#            processes each); each also writes firstprof-ALLOCATOR-N.kernels.json, its first step's GPU kernels by
#            name and count and its CPU operators thread by thread, and kernels_diff.py sets the two allocators'
#            kernels, and each thread's operators, side by side (FIRSTPROF_WORKLOAD=resnet50_amp for the
#            autograd thread's first-step time, 2026-12-07a)
#   replaycost replay_cost.py: bench/traces replayed through torch.empty, no kernels, expandable against
#            memcoord (the allocator's own cost: a cold pass, where the pool grows as in a first step, a warm
#            one, and alloc+free pair loops of 0 B, 64 KiB and 8 MiB), 6 processes each, pinned, with the
#            driver calls and the calls beside them (cudaMemGetInfo, events, the current device);
#            REPLAYCOST_TRACES=a,b (resnet50_amp,gpt2_fp32,alternating), REPLAYCOST_REPEAT=N,
#            REPLAYCOST_ALLOCATORS=a,b (expandable,memcoord; memcoord-pluggable: memcoord without the shim)
#   losses   bench_allocators.py --deterministic, 6 steps of all five workloads x 3 allocators: losses bit for bit
#            (184 s on an H100); LOSSES_WORKLOADS=a,b names others
#   traces   bench_allocators.py --trace-dir: memcoord's traces of alternating and gpt2_fp32, each call with its
#            thread, in $out/traces.tgz, for `memcoord replay` with the run's threads (2 processes, ~35 s);
#            TRACE_WORKLOADS=a,b names other workloads
#   variants bench_allocators.py: alternating and gpt2_fp32 under expandable, memcoord and memcoord with
#            MEMCOORD_ALLOC_CONF thread_cache_idle_misses:0, thread_cache_fence:off, thread_cache:512KiB,
#            large_map_unit:40MiB and free_marker_interval_us:0, 2 processes each (device memory and first-step
#            driver calls of each setting; 16 steps a process, as before the pair's 48; 28 processes of 16-17 s,
#            ~490 s, an estimate: not yet run as one part)
# BENCH_CPUS=fastest:N (or a CPU list) runs bench1, bench2, firststep, variants and replaycost on those CPUs in
# place of the GPU's local ones: fastest:N takes the N on which a Python probe ran fastest (cpu_pinning.py says why).
# PACK_OUT=1 leaves $OUT holding one archive of the logs, run_on_h200.tgz (a second call packing the same $OUT
# replaces it with one holding it). Exits non-zero when a part failed (each part's last lines say why).
set -uo pipefail
usage() { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }
[ $# -gt 0 ] || { usage; exit 2; }
cd "$(dirname "$0")/../.." || exit 2
bundle=${MEMCOORD_BUNDLE:-$PWD/.device-bundle}
# The built package and the shim stay on the machine between calls (while it is warm); logs go to $OUT.
state=/tmp/memcoord-h200
out=${OUT:-$state/logs}
mkdir -p "$out" "$state"
[ -f "$bundle/lib/libmemcoord_capi.so" ] || { echo "run_on_h200: no $bundle/lib/libmemcoord_capi.so (carry .device-bundle)"; exit 2; }
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export MEMCOORD_CAPI_LIB="$bundle/lib/libmemcoord_capi.so" NCCL_NVLS_ENABLE=0 MEMCOORD_BACKEND=${MEMCOORD_BACKEND:-cuda-vmm}
export TORCH_EXTENSIONS_DIR="$state/torch_extensions" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
site="$state/site"
export PYTHONPATH="$site:$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
failed=()

part_shim() {
  rm -rf "$site"
  if MEMCOORD_TORCH_SHIM=required python3 -m pip install --no-build-isolation --no-deps --no-index --target "$site" \
      ./python > "$out/pip.log" 2>&1; then
    echo "shim: pip built the package and the shim against $(python3 -c 'import torch; print(torch.__version__)')"
  else
    echo "shim: pip install failed (tail of $out/pip.log below); trying a JIT build"
    tail -15 "$out/pip.log"
    rm -rf "$site"
  fi
  python3 - <<'EOF'
import torch  # as memcoord.enable() does: the built shim links to libtorch
import memcoord._torch as t
module = t._load_shim("required")
print("shim: loaded", module.__file__)
EOF
}

part_checks() {
  python3 examples/pytorch/integration_checks.py --timeout 240 ${CHECKS_ONLY:+--only "$CHECKS_ONLY"} 2>&1 |
    tee "$out/checks.log" | tail -18
}
part_abort() { python3 examples/pytorch/abort_demo.py --memcoord-bin "$bundle/bin" 2>&1 | tee "$out/abort.log" | tail -8; }
part_abort_nccl() {  # a 2-GPU machine (kind nvidia-h200-x2): NCCL, one GPU per rank, the process group aborted
  python3 examples/pytorch/abort_demo.py --backend nccl --memcoord-bin "$bundle/bin" 2>&1 | tee "$out/abort-nccl.log" |
    tail -8
}
part_trim() { python3 examples/pytorch/cluster_trim.py --memcoord-bin "$bundle/bin" 2>&1 | tee "$out/trim.log" | tail -12; }
part_train() {
  local rc=0
  echo "== torchrun --nproc-per-node 2 (gloo: two ranks share the GPU)"
  torchrun --nproc-per-node 2 --master-port 29531 examples/pytorch/train.py --workload tiny_gpt2 --steps 30 \
    --backend gloo 2>&1 | tee "$out/train-torchrun.log" | grep -E "^train:|error|Error" | tail -5 || rc=1
  grep -q "^train: .*(fell)" "$out/train-torchrun.log" || rc=1
  echo "== memcoord-launch -n 2 --start-coordinator"
  MEMCOORD_BIN_DIR="$bundle/bin" launch/memcoord-launch -n 2 --start-coordinator -- \
    python3 examples/pytorch/train.py --workload tiny_gpt2 --steps 30 --backend gloo 2>&1 |
    tee "$out/train-launch.log" | grep -E "^train:|memcoord-launch|error|Error" | tail -5 || rc=1
  grep -q "^train: .*(fell)" "$out/train-launch.log" || rc=1
  return $rc
}
part_bench1() {
  python3 examples/pytorch/bench_allocators.py --workloads "${BENCH1_WORKLOADS:-gpt2_fp32,gpt2_bf16_varlen,resnet50_amp}" \
    --repeat "${BENCH_REPEAT:-3}" --cold-steps "${BENCH_COLD:-0}" "${timer_args[@]}" "${pin_args[@]}" --json "$out/bench1.json" 2>&1 |
    tee "$out/bench1.log" | sed -n '/== allocators/,$p'
}
part_bench2() {
  python3 examples/pytorch/bench_allocators.py --workloads llama_1b,alternating --repeat "${BENCH_REPEAT:-3}" \
    --cold-steps "${BENCH_COLD:-0}" "${timer_args[@]}" "${pin_args[@]}" \
    --json "$out/bench2.json" 2>&1 | tee "$out/bench2.log" | sed -n '/== allocators/,$p'
}
# shellcheck disable=SC2030,SC2031  # each subshell exports its own CUDA_VISIBLE_DEVICES: that is the point
part_benches() {
  local gpus
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU ')
  if [ "${gpus:-0}" -lt 2 ]; then
    echo "benches: $gpus GPU(s): bench1, then bench2"
    part_bench1 && part_bench2
    return
  fi
  echo "benches: $gpus GPUs: bench1 on GPU 0 and bench2 on GPU 1 at once (each pinned to its own GPU's local CPUs)"
  (export CUDA_VISIBLE_DEVICES=0; part_bench1 > "$out/benches-gpu0.txt" 2>&1) &
  local first=$!
  (export CUDA_VISIBLE_DEVICES=1; part_bench2 > "$out/benches-gpu1.txt" 2>&1) &
  local second=$! rc=0
  wait $first || rc=1
  wait $second || rc=1
  cat "$out/benches-gpu0.txt" "$out/benches-gpu1.txt"
  return $rc
}
part_gtests() {
  local rc=0 suite
  for suite in allocator_gpu_tests worker_c_abi_gpu_tests; do
    "$bundle/bin/$suite" --gtest_brief=1 > "$out/$suite.log" 2>&1 || rc=1
    echo "$suite: $(grep -E '^\[  (PASSED|FAILED)  \]|tests? ran' "$out/$suite.log" | tr '\n' ' ')"
  done
  "$bundle/bin/capi_bench" --lib "$bundle/lib/libmemcoord_capi.so" --backend cuda-vmm --threads 1 4 --control \
    > "$out/capi_bench.json" 2> "$out/capi_bench.log" || rc=1
  tail -c 1500 "$out/capi_bench.json"
  # Again with each thread on its own physical core (no two on one core's SMT siblings): 2026-12-06's
  # unpinned run took 70.3 ns a pair at 4 threads against 45.0 at 1, where earlier runs were level.
  local cores
  cores=$(distinct_core_cpus 4)
  echo "capi_bench pinned to CPUs $cores (one per physical core; $(lscpu 2>/dev/null | grep -E '^Thread\(s\) per core' | tr -s ' '))"
  # 40 runs: ten one-thread runs on each of the four CPUs (seven gave each one or two), a few seconds in all.
  "$bundle/bin/capi_bench" --lib "$bundle/lib/libmemcoord_capi.so" --backend cuda-vmm --threads 1 4 --control \
    --runs 40 --cpus "$cores" > "$out/capi_bench_pinned.json" 2> "$out/capi_bench_pinned.log" || rc=1
  python3 -c 'import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    sums = " (peak sums: %.0f a million pairs)" % r["peak_sums_per_million_pairs"] if "peak_sums" in r else ""
    if "median_cpu_ratio" in r:
        print("%s, %d threads against 1, CPU by CPU: median %.3f%s" % (r["lib"], r["threads"], r["median_cpu_ratio"],
              sums), {c: round(x, 3) for c, x in r["cpu_ratio"].items()})
        if "median_undisturbed_cpu_ratio" in r:
            print("  undisturbed threads alone (the paired control calm on their CPU): median %.3f, %d of %d disturbed"
                  % (r["median_undisturbed_cpu_ratio"], r["disturbed_threads"], len(r["runs"]) * r["threads"]),
                  {c: round(x, 3) for c, x in r["undisturbed_cpu_ratio"].items()})
    elif sums:
        print("%s, %d thread%s" % (r["lib"], r["threads"], sums))' "$out/capi_bench_pinned.json" || rc=1
  return $rc
}
# The first CPU of each of the first N physical cores (package and core id from sysfs, $SYSFS_CPU in tests),
# comma-separated.
distinct_core_cpus() {
  local n=$1 root=${SYSFS_CPU:-/sys/devices/system/cpu} cpu key seen=" " list=""
  for cpu in $(find "$root" -maxdepth 1 -name 'cpu[0-9]*' | sed 's/.*cpu//' | sort -n); do
    key=$(cat "$root/cpu$cpu/topology/physical_package_id" 2>/dev/null)-$(cat "$root/cpu$cpu/topology/core_id" 2>/dev/null)
    case "$seen" in *" $key "*) continue ;; esac
    seen="$seen$key "
    list="$list${list:+,}$cpu"
    [ "$(echo "$list" | tr ',' '\n' | wc -l)" -ge "$n" ] && break
  done
  echo "$list"
}
part_traces() {
  rm -rf "$out/traces"
  python3 examples/pytorch/bench_allocators.py --workloads "${TRACE_WORKLOADS:-alternating,gpt2_fp32}" --allocators memcoord \
    --trace-dir "$out/traces" --json "$out/traces.json" 2>&1 | tee "$out/traces.log" | grep -E "process|bench_allocators"
  tar czf "$out/traces.tgz" -C "$out" traces && rm -rf "$out/traces" && ls -l "$out/traces.tgz"
}
part_variants() {
  python3 examples/pytorch/bench_allocators.py --workloads alternating,gpt2_fp32 --steps 16 --repeat 2 "${timer_args[@]}" "${pin_args[@]}" \
    --allocators "expandable,memcoord,memcoord[thread_cache_idle_misses:0],memcoord[thread_cache_fence:off],memcoord[thread_cache:512KiB],memcoord[large_map_unit:40MiB],memcoord[free_marker_interval_us:0]" \
    --json "$out/variants.json" 2>&1 | tee "$out/variants.log" | sed -n '/== allocators/,/== targets/p'
}
part_firststep() {
  python3 examples/pytorch/bench_allocators.py --workloads "${FIRSTSTEP_WORKLOADS:-gpt2_fp32,resnet50_amp,alternating}" \
    --steps "${FIRSTSTEP_STEPS:-8}" --allocators "${FIRSTSTEP_ALLOCATORS:-expandable,memcoord}" \
    --repeat "${FIRSTSTEP_REPEAT:-6}" --cold-steps "${FIRSTSTEP_COLD:-0}" "${timer_args[@]}" "${pin_args[@]}" \
    --json "$out/firststep.json" 2>&1 |
    tee "$out/firststep.log" |
    sed -n '/== allocators/,$p'
}
part_firstprof() {  # where the first step's CPU time goes, operator by operator, two processes per allocator
  local workload=${FIRSTPROF_WORKLOAD:-llama_1b} round allocator rc=0 pin=() kernels
  [ -n "${gpu_cpus:-}" ] && pin=(taskset -c "$gpu_cpus")
  for round in $(seq 1 "${FIRSTPROF_ROUNDS:-2}"); do
    for allocator in expandable memcoord; do
      echo "-- $workload $allocator, process $round"
      kernels="$out/firstprof-$allocator-$round.kernels.json"
      "${pin[@]}" python3 examples/pytorch/profile_first_step.py "$workload" "$allocator" --kernels "$kernels" \
        > "$out/firstprof-$allocator-$round.log" 2>&1 || rc=1
      grep -E "first step|Name|^Self CPU|^ *(aten|cuda|Optimizer|autograd|memcoord)|memcoord's Python|kernel names|self CPU by thread" \
        "$out/firstprof-$allocator-$round.log" | head -22
    done
  done
  echo "-- the first steps' GPU kernels, expandable against memcoord"
  python3 examples/pytorch/kernels_diff.py "$out"/firstprof-*.kernels.json --json "$out/firstprof-kernels-diff.json" \
    || rc=1
  return $rc
}
part_replaycost() {  # what each allocator's calls cost with no model around them
  local timer=()
  [ ${#timer_args[@]} -gt 0 ] && timer=(--timer "${timer_args[1]}")
  python3 examples/pytorch/replay_cost.py --traces "${REPLAYCOST_TRACES:-resnet50_amp,gpt2_fp32,alternating}" \
    --allocators "${REPLAYCOST_ALLOCATORS:-expandable,memcoord}" --repeat "${REPLAYCOST_REPEAT:-6}" "${timer[@]}" "${pin_args[@]}" \
    --json "$out/replaycost.json" 2>&1 | tee "$out/replaycost.log"
}
part_losses() {
  python3 examples/pytorch/bench_allocators.py --deterministic --steps 6 \
    --workloads "${LOSSES_WORKLOADS:-gpt2_fp32,gpt2_bf16_varlen,resnet50_amp,llama_1b,alternating}" \
    --json "$out/losses.json" 2>&1 |
    tee "$out/losses.log" | sed -n '/== targets/,$p' | grep -E "losses|bench_allocators"
}

# Every part named must exist before any runs: a typo found after an hour of parts wastes device time.
for part in "$@"; do
  if ! declare -F "part_$part" > /dev/null; then
    echo "run_on_h200: unknown part '$part'; accepted: shim checks abort abort_nccl trim train bench1 bench2 benches gtests firststep firstprof replaycost losses traces variants"
    exit 2
  fi
done
# The driver-call timer (bench/gpu/driver_call_timer.c), built here when a C compiler is present: the benches
# then report each first step's driver calls for every allocator.
timer_args=()
if cc -O2 -shared -fPIC -o "$state/driver_call_timer.so" bench/gpu/driver_call_timer.c -ldl 2> "$out/timer-build.log"; then
  timer_args=(--driver-timer "$state/driver_call_timer.so")
fi
# Every bench process on the GPU's local CPUs (cpu_pinning.py), when sysfs and nvidia-smi name them.
pin_args=()
if pinning=$(python3 -c "import sys; sys.path.insert(0, 'examples/pytorch'); import cpu_pinning; print('bench processes on CPUs', cpu_pinning.format_cpus(cpu_pinning.gpu_local_cpus()))" 2>&1); then
  pin_args=(--cpus auto)
  gpu_cpus=${pinning##* }
  echo "$pinning"
else
  echo "bench processes not pinned: ${pinning##*$'\n'}"
fi
# BENCH_CPUS=fastest:4 (or a list): the processes of bench1, bench2, firststep, variants and
# replaycost on those CPUs instead; fastest:N picks the N that a probe found fastest (cpu_pinning.py).
if [ -n "${BENCH_CPUS:-}" ]; then
  pin_args=(--cpus "$BENCH_CPUS")
  echo "bench processes on --cpus $BENCH_CPUS (BENCH_CPUS)"
fi
# Every part but gtests needs the shim: built once per machine (the `shim` part rebuilds it).
# A shim built earlier on a machine like this one may be placed in python/memcoord/ instead.
# compgen -G: true when a pattern matches a file. `ls A B` failed whenever either pattern matched nothing, so
# the shim was rebuilt (and $site deleted) on every call.
shim_built() {
  compgen -G "$site/memcoord/_torch_shim*.so" > /dev/null || compgen -G "python/memcoord/_torch_shim*.so" > /dev/null
}
needs_shim=0
for part in "$@"; do [ "$part" = gtests ] || needs_shim=1; done
if [ "$1" != shim ] && [ $needs_shim = 1 ] && ! shim_built; then
  set -- shim "$@"
fi
for part in "$@"; do
  echo "==== $part"
  start=$SECONDS
  "part_$part" || failed+=("$part")
  echo "==== $part done in $((SECONDS - start)) s"
done
echo "run_on_h200: parts failed: ${failed[*]:-none}"
# PACK_OUT=1: the logs in one archive, $out/run_on_h200.tgz, in place of the files (the device tool returns a
# few files a call: 2026-12-06g lost a firststep.json that way).
if [ "${PACK_OUT:-0}" = 1 ]; then
  find "$out" -mindepth 1 -maxdepth 1 ! -name run_on_h200.tgz -printf '%P\n' | sort > "$state/packed.list"
  if tar czf "$state/run_on_h200.tgz" -C "$out" -T "$state/packed.list"; then
    (cd "$out" && xargs -d '\n' rm -rf -- < "$state/packed.list") && mv "$state/run_on_h200.tgz" "$out/"
    echo "run_on_h200: $(wc -l < "$state/packed.list") entries packed in $out/run_on_h200.tgz"
  fi
fi
[ ${#failed[@]} -eq 0 ]
