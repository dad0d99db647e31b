#!/usr/bin/env bash
# long_run.sh BIN_DIR OUT_DIR SECONDS [TARGET...]: a long fuzzing campaign, one target at a time at the
# lowest CPU priority (the build machines are shared), each for SECONDS. Every target (default: each folder
# of corpus/) runs through run_fuzzer.sh with its corpus kept in OUT_DIR/corpus/<target> (so a second
# campaign continues the first), its log in OUT_DIR/<target>.log, and a crashing input in
# OUT_DIR/artifacts/<target>/. Appends one line per target to OUT_DIR/summary.tsv:
#   target  wall_s  cpu_s  executions  coverage(cov)  features(ft)  new_units  result
# Creating OUT_DIR/pause makes the campaign wait before its next target (e.g. while CI is timed).
# To add what a campaign found to the tree, keep only the units that add coverage:
#   BIN_DIR/<target> -merge=1 tests/fuzz/corpus/<target> OUT_DIR/corpus/<target>
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 out=$2 seconds=$3
shift 3
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for corpus in "$here"/corpus/*/; do targets+=("$(basename "$corpus")"); done
fi
mkdir -p "$out"
[ -f "$out/summary.tsv" ] ||
  printf 'target\twall_s\tcpu_s\texecutions\tcov\tft\tnew_units\tresult\n' >"$out/summary.tsv"

# last_stat LOG KEY: the value libFuzzer printed last for KEY (a `stat::KEY: N` line or `KEY: N` on a status line).
last_stat() {
  grep -oE "(stat::)?$2: +[0-9]+" "$1" | tail -1 | grep -oE '[0-9]+$' || echo "?"
}

for target in "${targets[@]}"; do
  while [ -e "$out/pause" ]; do sleep 10; done
  log=$out/$target.log
  echo "long_run: $target for $seconds s ($(date -u +%H:%M:%S) UTC)"
  start=$SECONDS
  cpu_before=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  MEMCOORD_FUZZ_WORK_DIR=$out/corpus nice -n 19 sh "$here/run_fuzzer.sh" "$bin/$target" "$here/corpus/$target" \
    "$out/artifacts/$target" "$seconds" >"$log" 2>&1
  rc=$?
  wall=$((SECONDS - start))
  # Children's user + system ticks of this shell (the fuzzer and its sh), as /proc reports them.
  cpu_after=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  cpu=$(((cpu_after - cpu_before) / $(getconf CLK_TCK)))
  result=ok
  if [ $rc -ne 0 ]; then
    result="FAILED rc=$rc: $(grep -m1 -oE '(ERROR: [A-Za-z]+: [^ ]+|deadly signal|out-of-memory|timeout|ERROR: libFuzzer: [a-z-]+)' "$log")"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$target" "$wall" "$cpu" \
    "$(last_stat "$log" number_of_executed_units)" "$(last_stat "$log" cov)" "$(last_stat "$log" ft)" \
    "$(last_stat "$log" new_units_added)" "$result" >>"$out/summary.tsv"
  tail -1 "$out/summary.tsv"
done
