#!/usr/bin/env bash
# launch_test.sh CASE BIN_DIR: one integration case for launch/memcoord-launch, launch/demo and
# memcoord-train (registered per case by tests/launch/CMakeLists.txt, label integration). Each case runs the
# real programs and asserts on exit codes and output; a failed assertion prints the captured output.
set -euo pipefail
case_name=${1:?usage: launch_test.sh CASE BIN_DIR}
bin="$(cd "${2:?usage: launch_test.sh CASE BIN_DIR}" && pwd)"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
launcher="$root/launch/memcoord-launch"
export MEMCOORD_BIN_DIR="$bin"
# The launcher must add what root needs by itself: do not inherit the entry script's Open MPI settings.
unset OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM OMPI_MCA_rmaps_base_oversubscribe
tmp="$(mktemp -d "${TMPDIR:-/tmp}/launch_test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
out="$tmp/out"

fail() {
  echo "FAIL [$case_name]: $*" >&2
  [ -f "$out" ] && { echo "---- captured output ----" >&2; cat "$out" >&2; }
  exit 1
}
# run_capture CMD...: runs with stdout+stderr in $out; sets rc.
run_capture() {
  set +e
  "$@" >"$out" 2>&1
  rc=$?
  set -e
}
expect_rc() { [ "$rc" -eq "$1" ] || fail "exit code $rc, expected $1"; }
expect_line() { grep -qE -- "$1" "$out" || fail "no line matching /$1/"; }
expect_no_line() { ! grep -qE -- "$1" "$out" || fail "unexpected line matching /$1/"; }
# alive PID: the process exists and is not a zombie waiting to be reaped; waits up to 3 s for it to go.
alive() {
  for _ in $(seq 30); do
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null || true)
    [ -z "$state" ] || [[ "$state" == Z* ]] && return 1
    sleep 0.1
  done
  return 0
}
# bytes "14.68 MB" -> 14680000 (FormatBytes' decimal units).
to_bytes() {
  awk -v v="$1" -v u="$2" 'BEGIN { m = 1; if (u == "KB") m = 1e3; else if (u == "MB") m = 1e6;
    else if (u == "GB") m = 1e9; else if (u == "TB") m = 1e12; printf "%.0f", v * m }'
}

# A rank program for the launcher cases: records its pid, then exits, crashes or sleeps as told.
rank_program="$tmp/rank.sh"
cat >"$rank_program" <<'EOF'
#!/usr/bin/env bash
rank=${OMPI_COMM_WORLD_RANK:-0}
echo $$ > "$RANK_DIR/pid.$rank"
echo "rank $rank coordinator=${MEMCOORD_COORDINATOR:-none} nvls=${NCCL_NVLS_ENABLE:-unset} extra=${MEMCOORD_TEST_EXTRA:-unset}"
if [ -n "${SHOW_TOKENS:-}" ]; then
  echo "rank $rank token_file=${MEMCOORD_TOKEN_FILE:-none} mode=$(stat -c %a "${MEMCOORD_TOKEN_FILE:-/nonexistent}" 2>/dev/null || echo none) admin=${MEMCOORD_ADMIN_TOKEN_FILE:-none} token=${MEMCOORD_TOKEN:-none}"
fi
if [ -n "${QUERY_COORDINATOR:-}" ]; then "$MEMCOORD_BIN_DIR/memcoord" status --coordinator "$MEMCOORD_COORDINATOR" --json >/dev/null || exit 5; fi
if [ "$rank" = "${CRASH_RANK:--1}" ]; then
  sleep 0.3
  case "${CRASH_HOW:-exit}" in
    exit) exit 7 ;;
    segv) kill -SEGV $$ ;;
  esac
fi
sleep "${SLEEP_S:-0}"
EOF
chmod +x "$rank_program"
export RANK_DIR="$tmp"

# find_rank_2 ADDRESS: the pid of the memcoord-train process that got coordinator ADDRESS and rank 2, looked for
# for up to 5 s: one pass over pgrep's list once missed a rank that was training (CI, 2026-12-06), and the
# zombies of earlier cases' ranks (reparented to a PID 1 that does not reap them) have no environment to read.
find_rank_2() {
  local pid
  for _ in $(seq 50); do
    for pid in $(pgrep -x memcoord-train || true); do
      if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "MEMCOORD_COORDINATOR=$1" &&
        { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=2"; then
        echo "$pid"
        return 0
      fi
    done
    sleep 0.1
  done
}

# train_with_dead_rank SIGNAL: 3 ranks of memcoord-train under memcoord-launch and a coordinator it starts;
# once training runs, rank 2 gets SIGNAL (KILL: a crash, the connection closes; STOP: a silent death the
# coordinator finds after --dead-after 3s). Sets rc, dead_pid and elapsed_ms (from the signal to the
# launcher's exit, bounded to 60 s); the output is in $out.
train_with_dead_rank() {
  "$launcher" -n 3 --start-coordinator memcoord-train --model m:32 --steps 100000 --min-step-ms 50 \
    --timeout-s 60 --print-every 10 >"$out" 2>&1 &
  local launcher_pid=$! address="" pid
  for _ in $(seq 600); do grep -qE '^step +20/' "$out" && break; sleep 0.1; done
  grep -qE '^step +20/' "$out" || fail "training did not reach step 20"
  address=$(sed -n 's/^memcoord-launch: started a coordinator on \([^ ]*\).*/\1/p' "$out")
  dead_pid=$(find_rank_2 "$address")
  if [ -z "$dead_pid" ]; then
    kill -TERM "$launcher_pid" 2>/dev/null || true # a 100000-step job must not outlive the test
    fail "rank 2 of the job on $address not found; memcoord-train processes: $(ps -o pid=,stat=,args= -C memcoord-train | tr '\n' ';')"
  fi
  local start_ns
  start_ns=$(date +%s%N)
  kill -"$1" "$dead_pid"
  for _ in $(seq 600); do kill -0 "$launcher_pid" 2>/dev/null || break; sleep 0.1; done
  elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000))
  if kill -0 "$launcher_pid" 2>/dev/null; then
    kill -TERM "$launcher_pid" 2>/dev/null || true
    kill -KILL "$dead_pid" 2>/dev/null || true
    fail "the launcher still runs 60 s after rank 2 got SIG$1"
  fi
  set +e
  wait "$launcher_pid"
  rc=$?
  set -e
  kill -KILL "$dead_pid" 2>/dev/null || true # a stopped rank mpirun could not end
}
# expect_survivors_name_rank_2: every survivor that said why it ended named rank 2, and left with exit code
# 75 (MEMCOORD_EXIT_ABORTED), not through a collective's timeout; the launcher blamed no survivor.
expect_survivors_name_rank_2() {
  expect_no_line '^memcoord-train rank [01]: (progress|training|evaluation|report|setup gather|sync)'
  expect_no_line '^memcoord-launch: rank [01] failed'
  if grep -qE '^memcoord-train rank [01]: the job was aborted' "$out"; then
    ! grep -E '^memcoord-train rank [01]: the job was aborted' "$out" |
      grep -vqE 'by the coordinator: rank 2 \(host [^,]*, pid '"$dead_pid"'\) is dead: .*; exiting with code 75 ' ||
      fail "a survivor's abort message does not name rank 2 (pid $dead_pid) and exit code 75"
  fi
}

case "$case_name" in
  demo_short)
    start=$(date +%s)
    run_capture "$root/launch/demo" "$bin" --short
    elapsed=$(($(date +%s) - start))
    expect_rc 0
    [ "$elapsed" -lt 45 ] || fail "the short demo took ${elapsed} s (budget 30 s, 45 s tolerated on a loaded machine)"
    expect_line '^memcoord-launch: started a coordinator on 127\.0\.0\.1:[0-9]+'
    expect_line '^coordinator 127\.0\.0\.1:[0-9]+: 4/4 ranks attached$'
    expect_line '^placement: model a .* -> device group [01] = ranks 0-1'
    expect_line '^placement: model b .* -> device group [01] = ranks 2-3'
    # Losses fall: the last progress line's loss is well below the first one's, for both models.
    for model in a b; do
      first=$(sed -n "s/^step .* | $model loss \([0-9.]*\) .*/\1/p" "$out" | head -1)
      last=$(sed -n "s/^step .* | $model loss \([0-9.]*\) .*/\1/p" "$out" | tail -1)
      [ -n "$first" ] && [ -n "$last" ] || fail "no progress lines for model $model"
      awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.5 * f) }' || fail "model $model loss $first -> $last did not fall by half"
    done
    # The trim: one step on all 4 ranks, as the trainer saw it and as the coordinator reported it.
    trim_line=$(grep -E '^trim +[0-9]+ +\| coordinator trim applied at the end of step [0-9]+ on 4/4 ranks \(all at the same step\):' "$out" | head -1)
    [ -n "$trim_line" ] || fail "no trim line covering 4/4 ranks at one step"
    step=$(echo "$trim_line" | sed 's/.*at the end of step \([0-9]*\) on.*/\1/')
    for r in 0 1 2 3; do
      pair=$(echo "$trim_line" | grep -oE " r$r [0-9.]+ [KMGT]?B -> [0-9.]+ [KMGT]?B") || fail "rank $r missing from the trim line"
      read -r _ before_v before_u _ after_v after_u <<<"$pair"
      before=$(to_bytes "$before_v" "$before_u")
      after=$(to_bytes "$after_v" "$after_u")
      [ "$after" -lt "$before" ] || fail "rank $r reserved did not drop at the trim ($pair)"
    done
    expect_line "^trimmed at the end of step $step: released [0-9.]+ [KMGT]?B on 4 ranks"
    [ "$(grep -cE "^  rank +[0-3]: step +$step  released +[1-9][0-9.]* [KMGT]?B" "$out")" -eq 4 ] ||
      fail "memcoord trim did not list 4 ranks releasing memory at step $step"
    # The cluster table: every rank live, three pools each.
    [ "$(grep -cE '^ +[0-3] .* (params|gradients|activations) .* live$' "$out")" -eq 12 ] ||
      fail "the status table does not show 4 live ranks with 3 pools each"
    expect_line '^== final report =='
    expect_line "^trim at the end of step $step: 4/4 ranks, released "
    expect_line '^losses fell: yes \| weights identical within each model: yes \| every trim on all ranks at one step: yes$'
    expect_line '^demo: done in [0-9.]+ s$'
    ;;

  bad_rank_count)
    # Past 64 bits, bash's own "integer expression expected" leaked out before the launcher's message.
    for bad in 0 -3 x 1.5 "" 100001 99999999999999999999; do
      run_capture "$launcher" -n "$bad" "$rank_program"
      expect_rc 2
      expect_line "^memcoord-launch: (-n must be a whole number of ranks from 1 to 100000, got '$bad'|missing -n N)"
      expect_no_line 'integer expression expected'
    done
    run_capture "$launcher" --dry-run -n 08 "$rank_program"  # a leading 0 is decimal, not octal
    expect_rc 0
    expect_line '^mpirun -np 8 '
    run_capture "$launcher" "$rank_program"
    expect_rc 2
    expect_line '^memcoord-launch: missing -n N'
    run_capture "$launcher" -n 2 --bogus "$rank_program"
    expect_rc 2
    expect_line "^memcoord-launch: unknown option '--bogus'"
    ;;

  missing_program)
    run_capture "$launcher" -n 2 no-such-program-here
    expect_rc 127
    expect_line "^memcoord-launch: program 'no-such-program-here' not found \(looked in $bin and PATH"
    run_capture "$launcher" -n 2 "$tmp/nothing/here"
    expect_rc 127
    expect_line "not found"
    run_capture "$launcher" -n 2
    expect_rc 2
    expect_line "missing PROGRAM"
    # A name that is also a shell builtin: `command -v true` answered the builtin's bare name, "not found".
    run_capture "$launcher" --dry-run -n 2 -- true
    expect_rc 0
    expect_line " $(type -P true) \$"
    run_capture "$launcher" -n 2 -- true
    expect_rc 0
    ;;

  unreachable_coordinator)
    # A port nothing listens on: bind one, note it, close it.
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 1)
    run_capture "$launcher" -n 2 --coordinator "127.0.0.1:$port" "$rank_program"
    expect_rc 3
    expect_line "^memcoord-launch: coordinator 127\.0\.0\.1:$port is unreachable"
    [ ! -e "$tmp/pid.0" ] || fail "a rank started although the coordinator was unreachable"
    run_capture "$launcher" -n 2 --coordinator nonsense "$rank_program"
    expect_rc 2
    run_capture "$launcher" -n 2 --coordinator 127.0.0.1:1 --start-coordinator "$rank_program"
    expect_rc 2
    ;;

  crashing_rank)
    CRASH_RANK=2 SLEEP_S=20 run_capture "$launcher" -n 4 "$rank_program"
    expect_rc 7
    expect_line '^memcoord-launch: rank 2 failed with exit code 7; the other ranks were stopped'
    for r in 0 1 3; do
      pid=$(cat "$tmp/pid.$r")
      ! alive "$pid" || fail "rank $r (pid $pid) still runs after rank 2 failed"
    done
    ;;

  signalled_rank)
    CRASH_RANK=1 CRASH_HOW=segv SLEEP_S=20 run_capture "$launcher" -n 3 "$rank_program"
    [ "$rc" -ne 0 ] || fail "exit code 0 although rank 1 crashed"
    expect_line '^memcoord-launch: rank 1 failed: killed by signal 11 \(Segmentation fault\)'
    ;;

  sigterm_forwarded)
    set -m  # background jobs keep SIGINT (a non-interactive shell would ignore it for them)
    for sig in INT TERM; do
      rm -f "$tmp"/pid.*
      SLEEP_S=30 "$launcher" -n 3 --start-coordinator "$rank_program" >"$out" 2>&1 &
      launcher_pid=$!
      for _ in $(seq 100); do [ -e "$tmp/pid.2" ] && [ -e "$tmp/pid.0" ] && [ -e "$tmp/pid.1" ] && break; sleep 0.1; done
      [ -e "$tmp/pid.2" ] || fail "ranks did not start"
      coordinator_pid=$(sed -n 's/.*started a coordinator on .* (pid \([0-9]*\)).*/\1/p' "$out")
      [ -n "$coordinator_pid" ] || fail "no coordinator pid in the launcher's output"
      kill -"$sig" "$launcher_pid"
      set +e
      wait "$launcher_pid"
      rc=$?
      set -e
      if [ "$sig" = INT ]; then expect_rc 130; else expect_rc 143; fi
      expect_line "^memcoord-launch: SIG$sig: stopping the job"
      sleep 0.5
      for r in 0 1 2; do
        ! alive "$(cat "$tmp/pid.$r")" || fail "rank $r still runs after SIG$sig"
      done
      ! alive "$coordinator_pid" || fail "the coordinator still runs after SIG$sig"
    done
    ;;

  dry_run_flags)
    MEMCOORD_TEST_EXTRA=1 NCCL_DEBUG=WARN run_capture "$launcher" --dry-run -n 2 "$rank_program" --flag
    expect_rc 0
    expect_line '^mpirun -np 2 '
    expect_line ' -x MEMCOORD_TEST_EXTRA '
    expect_line ' -x NCCL_DEBUG '
    expect_line ' -x NCCL_NVLS_ENABLE '
    expect_line "$rank_program --flag"
    if [ "$(id -u)" -eq 0 ]; then expect_line ' --allow-run-as-root '; else expect_no_line 'allow-run-as-root'; fi
    if [ "$(nproc)" -ge 2 ]; then expect_no_line 'oversubscribe'; fi
    run_capture "$launcher" --dry-run -n "$(($(nproc) + 1))" "$rank_program"
    expect_line ' --oversubscribe --bind-to none '
    printf 'localhost slots=64\n' >"$tmp/hosts"
    run_capture "$launcher" --dry-run -n "$(($(nproc) + 1))" --hostfile "$tmp/hosts" "$rank_program"
    expect_line " --hostfile $tmp/hosts "
    expect_no_line 'oversubscribe'
    run_capture "$launcher" --dry-run -n 2 --hostfile "$tmp/missing-hosts" "$rank_program"
    expect_rc 2
    expect_line "hostfile '$tmp/missing-hosts' does not exist"
    # NVLink multicast stays off even when the caller's environment turns it on.
    NCCL_NVLS_ENABLE=1 run_capture "$launcher" -n 1 "$rank_program"
    expect_rc 0
    expect_line '^rank 0 .* nvls=0 '
    ;;

  started_coordinator)
    QUERY_COORDINATOR=1 MEMCOORD_TEST_EXTRA=yes run_capture "$launcher" -n 2 --start-coordinator "$rank_program"
    expect_rc 0
    address=$(sed -n 's/^memcoord-launch: started a coordinator on \([^ ]*\).*/\1/p' "$out")
    [ -n "$address" ] || fail "the launcher did not say where the coordinator listens"
    [ "$(grep -c "^rank [01] coordinator=$address nvls=0 extra=yes$" "$out")" -eq 2 ] ||
      fail "the ranks did not both see MEMCOORD_COORDINATOR=$address and the forwarded variables"
    set +e
    timeout 10 "$bin/memcoord" status --coordinator "$address" >/dev/null 2>&1
    status_rc=$?
    set -e
    [ "$status_rc" -ne 0 ] || fail "the coordinator at $address still answers after the job ended"
    ;;

  locked_coordinator)
    # The started coordinator is locked: ranks get the worker token (a 0600 file), never the admin token,
    # even when the caller's environment has one; the launcher prints the admin token's file.
    touch "$tmp/caller-admin.token"
    MEMCOORD_ADMIN_TOKEN_FILE="$tmp/caller-admin.token" MEMCOORD_TOKEN=caller SHOW_TOKENS=1 QUERY_COORDINATOR=1 \
      SLEEP_S=6 "$launcher" -n 2 --start-coordinator --dead-after 5s "$rank_program" >"$out" 2>&1 &
    launcher_pid=$!
    for _ in $(seq 100); do grep -q '^rank 1 token_file=' "$out" && grep -q '^rank 0 token_file=' "$out" && break; sleep 0.1; done
    address=$(sed -n 's/^memcoord-launch: started a coordinator on \([^ ]*\).*/\1/p' "$out")
    admin=$(sed -n 's/^memcoord-launch: admin token in \([^ ]*\) .*/\1/p' "$out")
    [ -n "$address" ] && [ -n "$admin" ] || fail "the launcher did not print the coordinator and the admin token file"
    [ "$(stat -c %a "$admin")" = 600 ] || fail "the admin token file $admin is not mode 0600"
    coordinator_pid=$(sed -n 's/.*started a coordinator on .* (pid \([0-9]*\)).*/\1/p' "$out")
    ps -o args= -p "$coordinator_pid" | grep -q -- "--token-file $(dirname "$admin")/worker.token --admin-token-file $admin --dead-after 5s" ||
      fail "the coordinator was not started with both tokens and --dead-after 5s: $(ps -o args= -p "$coordinator_pid")"
    [ "$(tr -d '\n' <"$admin" | wc -c)" -eq 64 ] || fail "the admin token is not 32 random bytes in hex"
    worker_file=$(sed -n 's/^rank 0 token_file=\([^ ]*\) .*/\1/p' "$out")
    [ -n "$worker_file" ] && [ "$worker_file" != none ] || fail "rank 0 got no MEMCOORD_TOKEN_FILE"
    [ "$(grep -c "^rank [01] token_file=$worker_file mode=600 admin=none token=none$" "$out")" -eq 2 ] ||
      fail "the ranks did not both get the 0600 worker token file and no admin token"
    cmp -s "$worker_file" "$admin" && fail "the worker and admin tokens are the same"
    set +e
    "$bin/memcoord" status --coordinator "$address" >"$tmp/status.out" 2>&1
    anonymous_rc=$?
    MEMCOORD_TOKEN_FILE="$worker_file" "$bin/memcoord" trim --now --coordinator "$address" >"$tmp/trim.out" 2>&1
    worker_trim_rc=$?
    MEMCOORD_ADMIN_TOKEN_FILE="$admin" "$bin/memcoord" status --coordinator "$address" >"$tmp/admin.out" 2>&1
    admin_rc=$?
    set -e
    [ "$anonymous_rc" -ne 0 ] && grep -q UNAUTHENTICATED "$tmp/status.out" || fail "status without a token: $(cat "$tmp/status.out")"
    [ "$worker_trim_rc" -ne 0 ] && grep -q 'PERMISSION_DENIED.*Trim needs the admin token' "$tmp/trim.out" ||
      fail "trim with the worker token: $(cat "$tmp/trim.out")"
    [ "$admin_rc" -eq 0 ] || fail "status with the admin token: $(cat "$tmp/admin.out")"
    wait "$launcher_pid" || fail "the job failed"
    [ ! -e "$admin" ] || fail "the admin token file outlived the job"
    ;;

  multi_host_locked)
    # Across hosts (a hostfile) the started coordinator listens on every interface, which it may only do
    # because it has tokens; the run dir (the worker token) is in the current folder, which hosts share.
    if ! getent hosts "$(hostname -f 2>/dev/null || hostname)" >/dev/null; then
      echo "SKIP [$case_name]: this host's own name does not resolve, so a multi-host coordinator cannot be reached"
      exit 0
    fi
    printf 'localhost slots=4\n' >"$tmp/hosts"
    cd "$tmp"
    SHOW_TOKENS=1 QUERY_COORDINATOR=1 SLEEP_S=3 "$launcher" -n 2 --hostfile "$tmp/hosts" --start-coordinator \
      "$rank_program" >"$out" 2>&1 &
    launcher_pid=$!
    for _ in $(seq 100); do grep -q '^rank 1 token_file=' "$out" && grep -q '^rank 0 token_file=' "$out" && break; sleep 0.1; done
    coordinator_pid=$(sed -n 's/.*started a coordinator on .* (pid \([0-9]*\)).*/\1/p' "$out")
    [ -n "$coordinator_pid" ] || fail "no coordinator started"
    ps -o args= -p "$coordinator_pid" | grep -q -- '--listen 0.0.0.0:0 --token-file ' ||
      fail "the coordinator does not listen on 0.0.0.0 with a token: $(ps -o args= -p "$coordinator_pid")"
    wait "$launcher_pid" || fail "the job failed (the ranks' memcoord status with the worker token?)"
    expect_line "^rank 0 token_file=$tmp/memcoord-launch\.[A-Za-z0-9]+/worker.token mode=600 admin=none"
    expect_no_line '^memcoord-launch: started a coordinator on 127\.'
    ;;

  bad_dead_after)
    run_capture "$launcher" -n 1 --dead-after 5s "$rank_program"
    expect_rc 2
    expect_line 'add --start-coordinator'
    run_capture "$launcher" -n 1 --start-coordinator --dead-after soon "$rank_program"
    expect_rc 2
    expect_line "^memcoord-launch: --dead-after must be a duration such as 3s, 500ms or 2m, got 'soon'"
    ;;

  train_standalone)
    run_capture "$launcher" -n 2 memcoord-train --model m:48 --steps 40 --batch 64 --variable-batch \
      --eval-every 20 --eval-batch 1024 --print-every 10
    expect_rc 0
    expect_line '^memcoord-train: 2 ranks \| backend host .* coordinator: none \(standalone\)'
    # Why MPI: with NCCL built in, a group on the host backend computes on the host; a build without NCCL says so.
    expect_line '^model m: gradients over MPI \((the group computes on the host|this build has no NCCL)\), [0-9]+ gradient buckets'
    expect_line '^eval +20 +\| m eval loss [0-9.]+'
    expect_line '^m +0-1 .* identical \(checksum [0-9a-f]{16}\)$'
    expect_line '^losses fell: yes \| weights identical within each model: yes \| every trim on all ranks at one step: no trims$'
    # --require-trim without a coordinator cannot be satisfied: exit 1, said on stderr.
    run_capture "$launcher" -n 2 memcoord-train --model m:16 --steps 10 --eval-batch 64 --require-trim
    [ "$rc" -ne 0 ] || fail "--require-trim passed without any trim"
    expect_line 'memcoord-train: FAILED \(no cluster trim on every rank at one step\)'
    ;;

  train_bad_options)
    run_capture "$bin/memcoord-train" --model "oops"
    expect_rc 2
    expect_line "^memcoord-train: --model 'oops': expected NAME:HIDDEN\[:DEPTH\]"
    run_capture "$bin/memcoord-train" --model a:8,a:9
    expect_rc 2
    expect_line "used twice"
    run_capture "$bin/memcoord-train" --steps 0
    expect_rc 2
    run_capture "$bin/memcoord-train" --help
    expect_rc 0
    expect_line '75 \(MEMCOORD_EXIT_ABORTED\) the coordinator aborted the group because another rank died'
    run_capture "$launcher" -n 1 memcoord-train --model a:8,b:8 --steps 2
    expect_rc 1
    expect_line '2 models need at least as many ranks; got 1'
    expect_line '^memcoord-launch: rank 0 failed with exit code 1'
    ;;

  train_rank_killed)
    # A crash (SIGKILL): the coordinator sees the connection close at once and aborts the group; mpirun
    # also sees rank 2 end by a signal. Whichever comes first, the launcher names rank 2, never a survivor.
    train_with_dead_rank KILL
    echo "rank 2 SIGKILLed: the launcher exited $elapsed_ms ms later (rc $rc)"
    [ "$rc" -ne 0 ] || fail "exit code 0 although rank 2 was killed"
    expect_line '^memcoord-launch: rank 2 (failed: killed by signal 9|died \(rank 2 \(host )'
    expect_survivors_name_rank_2
    [ "$elapsed_ms" -lt 10000 ] || fail "the job took $elapsed_ms ms to end after rank 2 was killed (bound 10 s)"
    ;;

  train_rank_stopped)
    # A silent death (SIGSTOP; a host crash or a partition look the same): mpirun sees nothing, the
    # coordinator declares rank 2 dead after --dead-after (3 s) and aborts the group; the survivors leave
    # their collectives (the gradients' and the reporter's world all-gather) and exit 75 naming rank 2, and
    # the launcher reports rank 2's death, not the survivor mpirun saw end first. Bound: 3 s + the
    # coordinator's 25 ms sweep + the 1.5 s backstop + mpirun's teardown, on a loaded machine.
    # Run twice: the launcher reads the dead rank from its coordinator's log, and, with logging off,
    # from the survivors' own messages.
    for level in warn off; do
      MEMCOORD_LOG_LEVEL=$level train_with_dead_rank STOP
      echo "rank 2 SIGSTOPped (log level $level): the launcher exited $elapsed_ms ms later (rc $rc)"
      expect_rc 75
      expect_line '^memcoord-train rank [01]: the job was aborted by the coordinator: rank 2 \(host [^,]*, pid '"$dead_pid"'\) is dead: silent for [0-9]+ ms .*; exiting with code 75 \(MEMCOORD_EXIT_ABORTED\)'
      expect_line '^memcoord-launch: rank 2 died \(rank 2 \(host [^,]*, pid '"$dead_pid"'\) is dead: silent for [0-9]+ ms.*\); the coordinator aborted the job and rank [01] exited with code 75 \(aborted because another rank died\); the job was stopped \(exit 75\)$'
      expect_survivors_name_rank_2
      [ "$elapsed_ms" -ge 2900 ] || fail "the job ended $elapsed_ms ms after rank 2 stopped, before --dead-after (3 s)"
      [ "$elapsed_ms" -lt 12000 ] || fail "the job took $elapsed_ms ms to end after rank 2 stopped (bound 12 s)"
    done
    ;;

  *)
    echo "launch_test.sh: unknown case '$case_name'" >&2
    exit 2
    ;;
esac
echo "PASS [$case_name]"
