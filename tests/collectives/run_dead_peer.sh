#!/bin/sh
# run_dead_peer.sh MPIEXEC NP BINARY: runs the dead-peer test under `mpirun --enable-recovery` (so mpirun does
# not kill the survivors when one rank exits) and passes when exactly NP-1 ranks report gtest success.
# mpirun's own status is 0 under --enable-recovery whatever the ranks return, hence the count.
mpiexec="$1"; np="$2"; binary="$3"
output=$("$mpiexec" --oversubscribe --enable-recovery --quiet -np "$np" "$binary" --gtest_color=no 2>&1)
echo "$output"
passed=$(printf '%s\n' "$output" | grep -c '^\[  PASSED  \] 1 test')
failed=$(printf '%s\n' "$output" | grep -c '^\[  FAILED  \]')
echo "survivors passed: $passed of $((np - 1)); failed lines: $failed"
[ "$passed" -eq $((np - 1)) ] && [ "$failed" -eq 0 ]
