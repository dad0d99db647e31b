#!/bin/sh
# run_fuzzer.sh FUZZER SEED_CORPUS ARTIFACT_DIR [SECONDS]: runs one libFuzzer target for SECONDS (default
# $MEMCOORD_FUZZ_SECONDS, else 20) on its seed corpus. New inputs go to a scratch folder, never into the
# tree; a crash, leak, timeout (10 s per input) or RSS over 2 GiB leaves the input in ARTIFACT_DIR and fails
# with the fuzzer's report. MEMCOORD_FUZZ_WORK_DIR keeps the grown corpus between runs (e.g. long runs).
# The target's dictionary of tokens (dict/, chosen by the fuzzer's name) steers mutations into keywords the
# parsers would otherwise take millions of runs to guess.
set -eu
fuzzer=$1 seeds=$2 artifacts=$3
seconds=${4:-${MEMCOORD_FUZZ_SECONDS:-20}}
[ -x "$fuzzer" ] || { echo "run_fuzzer: not an executable: $fuzzer" >&2; exit 2; }
[ -d "$seeds" ] || { echo "run_fuzzer: no seed corpus folder: $seeds" >&2; exit 2; }
case $seconds in ''|*[!0-9]*) echo "run_fuzzer: seconds must be a whole number, got '$seconds'" >&2; exit 2 ;; esac
mkdir -p "$artifacts"
if [ -n "${MEMCOORD_FUZZ_WORK_DIR:-}" ]; then
  work=$MEMCOORD_FUZZ_WORK_DIR/$(basename "$fuzzer")
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
dict=
case $(basename "$fuzzer") in
  bytes_fuzz) dict=bytes.dict ;;
  trace_fuzz | trace_file_fuzz) dict=trace.dict ;;
  plan_request_fuzz | model_spec_fuzz) dict=planner_json.dict ;;
esac
dict_flag=
[ -n "$dict" ] && dict_flag="-dict=$(dirname "$0")/dict/$dict"
# The first folder receives new inputs; the seed corpus is only read.
# shellcheck disable=SC2086 # dict_flag is one word or none
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $dict_flag \
  -artifact_prefix="$artifacts/" "$work" "$seeds"
