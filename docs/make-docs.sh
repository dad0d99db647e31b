#!/usr/bin/env bash
# Remakes the pictures under docs/ with the tests' own commands:
#   docs/dashboard.png                   the dashboard: 4 ranks, a trim, a quota, a leak, rank 3 killed
#                                        (the browser test's scenario, tests/coordinator/dashboard_scenario.sh)
#   docs/status-watch.txt                `memcoord status --watch` on the same cluster, captured with tmux
#   docs/timeline-gpt2_bf16_varlen.svg   `memcoord replay --timeline --timeline-native` of the shared trace,
#   docs/timeline-gpt2_bf16_varlen.png   and its rendering by rsvg-convert
# Usage: docs/make-docs.sh [BIN_DIR (default build/release/bin)] [TRACE_DIR (default ../shared/data/traces)]
# Needs chromium, tmux and rsvg-convert (Debian: chromium tmux librsvg2-bin).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${1:-$root/build/release/bin}" && pwd)
traces=${2:-$root/../shared/data/traces}
docs=$root/docs
work=$(mktemp -d /tmp/memcoord-docs-XXXXXX)
for tool in chromium tmux rsvg-convert; do
  command -v "$tool" > /dev/null || { echo "make-docs: $tool is missing" >&2; exit 1; }
done

# 1. The timeline of the shared trace.
"$bin/memcoord" replay "$traces/gpt2_bf16_varlen.trace.gz" --repeat 1 \
  --timeline "$docs/timeline-gpt2_bf16_varlen.svg" --timeline-native > "$work/replay.txt"
rsvg-convert -w 1000 -o "$docs/timeline-gpt2_bf16_varlen.png" "$docs/timeline-gpt2_bf16_varlen.svg"

# 2. The dashboard, and 3. status --watch, on one live cluster.
# shellcheck source=../tests/coordinator/dashboard_scenario.sh
source "$root/tests/coordinator/dashboard_scenario.sh"
session=memcoord-docs-$$
cleanup() {
  tmux kill-session -t "$session" 2> /dev/null || true
  scenario_stop
}
trap cleanup EXIT
# `status --watch` starts once the workers are live, so it sees the trim, the quota, the death.
scenario_hook() {
  tmux new-session -d -s "$session" -x 160 -y 30 \
    "$bin/memcoord status --watch --interval-ms 500 --coordinator $ADDRESS --token-file $TOKEN_FILE"
}
scenario_start "$bin" "$work/scenario"
scenario_wait_leak "$bin"
tmux capture-pane -p -t "$session" > "$docs/status-watch.txt"
timeout 60 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
  --no-first-run --user-data-dir="$work/chromium" --window-size=1400,1000 --virtual-time-budget=3000 \
  --screenshot="$docs/dashboard.png" "http://127.0.0.1:$HTTP_PORT/#token=$(head -n 1 "$TOKEN_FILE")" 2> "$work/chromium.log" > /dev/null
echo "make-docs: wrote $docs/dashboard.png, status-watch.txt, timeline-gpt2_bf16_varlen.{svg,png}"
rm -rf "$work"
