#!/bin/sh
# pool_bench's FreeAfterForward, briefly: its counters say what it measured. Frees by the allocating thread
# count no other_thread_frees; frees by the other thread count every one of the 430 blocks, a pass. Usage:
# free_after_forward_test.sh POOL_BENCH
out=$("$1" --benchmark_filter=FreeAfterForward --benchmark_min_time=0.01 2>&1) || { echo "$out"; exit 1; }
echo "$out"
echo "$out" | grep -Eq 'FreeAfterForward/0 .*other_thread_frees_per_pass=0 ' || { echo "FAIL: /0 counted frees"; exit 1; }
echo "$out" | grep -Eq 'FreeAfterForward/1 .*other_thread_frees_per_pass=430 ' || { echo "FAIL: /1 not 430"; exit 1; }
