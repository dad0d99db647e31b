#!/bin/sh
# For the lead, on the H200 (run from the repository root): the C ABI's GPU tests, the GPU UUID, and the C
# ABI's cost.
#   1. worker_c_abi_gpu_tests: 6 tests (cuda-vmm and cuda): capture without a private pool fails at once with
#      "being captured ... memcoord_begin_allocate_to_pool" and cudaStreamEndCapture still succeeds; capture
#      into a private pool replays 3 times and reads back 7s; each device's blocks live on that device.
#      Expect "[  PASSED  ] 6 tests."
#   2. worker_gpu_uuid_tests: 2 tests: the cuda and cuda-vmm backends report the same "GPU-" + 36-character
#      UUID, one nvidia-smi lists, and a cuda-vmm worker's /metrics carries it as gpu_uuid. Prints
#      "cuda backend, device 0: GPU-..." and "/metrics: memcoord_worker_live{...,gpu_uuid="GPU-..."} 1";
#      expect "[  PASSED  ] 2 tests."
#   3. worker_c_abi_tests (host backend), then capi_bench: JSON with median_ns_per_pair at 1, 4 and 16 threads
#      for the host, cuda and cuda-vmm backends (targets: <= 100 ns at 1 thread; no worse per thread at 4).
#      Pass OLD_CAPI=path/to/old.so to measure a library built from an older commit side by side; PAIRS=N
#      (default 500000 per thread per run) shortens it.
# Where the programs come from:
#   a device bundle (the GPU machine has no gRPC, so this is the way there), built on the development machine:
#     export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
#     cmake --preset release -DCMAKE_CUDA_ARCHITECTURES="90-real;90-virtual" >/dev/null
#     cmake --build build/release --target worker_c_abi_gpu_tests worker_gpu_uuid_tests worker_c_abi_tests \
#       capi_bench memcoord_capi
#     ../shared/tools/device-bundle build/release .device-bundle
#   then `run` with carry [".device-bundle"] and the command `sh bench/worker/run_on_gpu.sh`. MEMCOORD_BUNDLE
#   names another bundle folder. capi_bench takes the bundle's library from MEMCOORD_CAPI_LIB (set below).
#   Without a bundle, on a machine with the whole toolchain: builds those targets in build/release first.
# Runs every step; exits non-zero when any failed.
set -u
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 NCCL_NVLS_ENABLE=0
bundle=${MEMCOORD_BUNDLE:-$PWD/.device-bundle}
if [ -x "$bundle/bin/capi_bench" ]; then
  bin="$bundle/bin"
  lib="$bundle/lib"
  export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "run_on_gpu: programs from the bundle $bundle"
else
  [ -d build/release ] || cmake --preset release >/dev/null || exit 1
  cmake --build --preset release --target worker_c_abi_gpu_tests worker_gpu_uuid_tests worker_c_abi_tests \
    capi_bench memcoord_capi || exit 1
  bin="$PWD/build/release/bin"
  lib="$PWD/build/release/lib"
fi
export MEMCOORD_CAPI_LIB="$lib/libmemcoord_capi.so"
failed=""
step() {
  "$@" || failed="$failed $(basename "$1")"
}
step "$bin/worker_c_abi_gpu_tests"
step "$bin/worker_gpu_uuid_tests"
step "$bin/worker_c_abi_tests" --gtest_brief=1
for backend in host cuda cuda-vmm; do
  if [ -n "${OLD_CAPI:-}" ]; then
    step "$bin/capi_bench" --lib "$OLD_CAPI" --lib "$MEMCOORD_CAPI_LIB" --backend "$backend" --threads 1,4,16 \
      --runs 7 --pairs "${PAIRS:-500000}"
  else
    step "$bin/capi_bench" --backend "$backend" --threads 1,4,16 --runs 7 --pairs "${PAIRS:-500000}"
  fi
done 2>/dev/null
[ -z "$failed" ] || { echo "run_on_gpu: failed:$failed"; exit 1; }
echo "run_on_gpu: every step passed"
