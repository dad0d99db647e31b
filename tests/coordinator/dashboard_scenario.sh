#!/usr/bin/env bash
# The dashboard scenario, shared by the browser test and docs/make-docs.sh: a coordinator with HTTP and an
# admin token, four worker processes (each its own group, so killing one aborts nobody else; rank 2 leaks
# 256 KiB a step), a cache trim of every rank, a quota on rank 1, then rank 3 killed with SIGKILL.
#   source tests/coordinator/dashboard_scenario.sh; scenario_start BIN_DIR WORK_DIR; ...; scenario_stop
# Sets ADDRESS (gRPC), HTTP_PORT, TOKEN_FILE (the worker token), ADMIN_TOKEN_FILE and ADMIN_TOKEN. Every
# process it starts is stopped by scenario_stop.
scenario_pids=()

scenario_start() {
  local bin=$1 work=$2
  mkdir -p "$work"
  TOKEN_FILE=$work/worker-token
  printf '%s\n' memcoord-docs-worker-token > "$TOKEN_FILE"
  ADMIN_TOKEN=memcoord-docs-admin-token
  ADMIN_TOKEN_FILE=$work/admin-token
  printf '%s\n' "$ADMIN_TOKEN" > "$ADMIN_TOKEN_FILE"
  "$bin/memcoord" coordinator --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --token-file "$TOKEN_FILE" \
    --admin-token-file "$ADMIN_TOKEN_FILE" \
    --dead-after 1s > "$work/coordinator.log" 2>&1 &
  scenario_pids+=($!)
  for _ in $(seq 100); do
    grep -q "listening on" "$work/coordinator.log" && break
    sleep 0.05
  done
  ADDRESS=$(sed -n 's/.*listening on \([0-9.:]*\).*/\1/p' "$work/coordinator.log")
  HTTP_PORT=$(sed -n 's/.*metrics on port \([0-9]*\).*/\1/p' "$work/coordinator.log")
  if [ -z "$ADDRESS" ] || [ -z "$HTTP_PORT" ]; then
    echo "scenario: the coordinator did not start:" >&2
    cat "$work/coordinator.log" >&2
    return 1
  fi
  for rank in 0 1 2 3; do
    local leak=0
    [ "$rank" = 2 ] && leak=256KiB  # small: the simulated device (1 GiB) must not fill during a slow run
    MEMCOORD_COORDINATOR=$ADDRESS MEMCOORD_TOKEN_FILE=$TOKEN_FILE MEMCOORD_RANK=$rank MEMCOORD_LOCAL_RANK=$rank \
      MEMCOORD_WORLD_SIZE=4 "$bin/memcoord_test_worker" --until-abort --steps 0 --step-ms 40 \
      --alloc $((48 + 16 * rank))MiB --leak "$leak" --pools default,kv_cache --report-ms 100 --group "g$rank" \
      > "$work/worker$rank.log" 2>&1 &
    scenario_pids+=($!)
  done
  local cli=("$bin/memcoord")
  for _ in $(seq 200); do
    [ "$("${cli[@]}" status --coordinator "$ADDRESS" --token-file "$TOKEN_FILE" --json 2>/dev/null |
      grep -oE '"state": ?"live"' | wc -l)" = 4 ] && break
    sleep 0.05
  done
  scenario_wait_leak "$bin" || return 1
  # A caller may start watching here, before anything happens (make-docs starts `status --watch`).
  if declare -F scenario_hook > /dev/null; then scenario_hook; fi
  sleep 1  # samples for the timeline before anything happens
  "${cli[@]}" trim --coordinator "$ADDRESS" --admin-token-file "$ADMIN_TOKEN_FILE" --now > "$work/trim.log" 2>&1 || true
  sleep 1
  "${cli[@]}" quota set --coordinator "$ADDRESS" --admin-token-file "$ADMIN_TOKEN_FILE" --rank 1 --pool default 512MiB \
    > "$work/quota.log" 2>&1 || true
  sleep 1
  kill -KILL "${scenario_pids[4]}" 2>/dev/null || true  # rank 3
  sleep 2  # the death is seen at once (its stream broke); more samples after it
}

# Waits (up to 20 s) until the coordinator shows rank 2's leak alert: the leak watch needs 8 step-end reports
# in a row that grew, which a loaded machine can take a while to deliver.
scenario_wait_leak() {
  local bin=$1
  for _ in $(seq 200); do
    "$bin/memcoord" status --coordinator "$ADDRESS" --token-file "$TOKEN_FILE" --json 2>/dev/null |
      grep -q '"bytes_per_step"' && return 0
    sleep 0.1
  done
  echo "scenario: no leak alert for rank 2 after 20 s" >&2
  return 1
}

scenario_stop() {
  for pid in "${scenario_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${scenario_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  scenario_pids=()
}
