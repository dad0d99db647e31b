#!/bin/sh
# For the lead, on the H200 (run from the repository root): the C ABI's GPU tests and its cost.
#   1. worker_c_abi_gpu_tests: 6 tests (cuda-vmm and cuda): capture without a private pool fails at once with
#      "being captured ... memcoord_begin_allocate_to_pool" and cudaStreamEndCapture still succeeds; capture
#      into a private pool replays 3 times and reads back 7s; each device's blocks live on that device.
#      Expect "[  PASSED  ] 6 tests."
#   2. capi_bench: JSON with median_ns_per_pair at 1, 4 and 16 threads for the host, cuda and cuda-vmm
#      backends (targets: <= 100 ns at 1 thread; no worse per thread at 4). Pass OLD_CAPI=path/to/old.so to
#      measure a library built from an older commit side by side.
set -eu
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
[ -d build/release ] || cmake --preset release >/dev/null
cmake --build --preset release --target worker_c_abi_gpu_tests worker_c_abi_tests capi_bench memcoord_capi
./build/release/bin/worker_c_abi_gpu_tests
./build/release/bin/worker_c_abi_tests --gtest_brief=1
libs="--lib $PWD/build/release/lib/libmemcoord_capi.so"
[ -n "${OLD_CAPI:-}" ] && libs="--lib $OLD_CAPI $libs"
for backend in host cuda cuda-vmm; do
  # shellcheck disable=SC2086
  ./build/release/bin/capi_bench $libs --backend "$backend" --threads 1,4,16 --runs 7 --pairs 500000 2>/dev/null
done
