#!/bin/sh
# install_test.sh BUILD_DIR SOURCE_DIR WORK_DIR: installs the build into WORK_DIR/prefix with `cmake --install`,
# checks what landed there, then configures, builds and runs tests/install/consumer against it: a project
# that does find_package(memcoord) and links memcoord::worker and memcoord::capi. Fails naming the step.
set -eu
name=install_test
. "$(dirname "$0")/install_prefix.sh"

for file in bin/memcoord bin/memcoord-launch lib/libmemcoord_capi.so lib/libmemcoord_worker.a \
            lib/libmemcoord_allocator.a lib/libmemcoord_common.a include/worker/memcoord.h include/worker/worker.h \
            include/allocator/caching_pool.h include/common/status.h \
            lib/cmake/memcoord/memcoordConfig.cmake lib/cmake/memcoord/memcoordConfigVersion.cmake \
            lib/cmake/memcoord/memcoordTargets.cmake; do
  [ -e "$prefix/$file" ] || fail "$file is not in the installed tree"
done
step "$(find "$prefix" -type f | wc -l) files installed; bin/, lib/, include/ and lib/cmake/memcoord/ are there"

# The exported package must not point back into the source or build tree.
if grep -rl -e "$source" -e "$build" "$prefix/lib/cmake/memcoord" >/dev/null 2>&1; then
  grep -rn -e "$source" -e "$build" "$prefix/lib/cmake/memcoord" | head -5 >&2
  fail "the installed CMake package names the source or build tree"
fi

"$prefix/bin/memcoord" --help > /dev/null || fail "the installed memcoord CLI does not run"
"$prefix/bin/memcoord-launch" --help > /dev/null || fail "the installed memcoord-launch does not run"

generator=""
command -v ninja > /dev/null && generator="-G Ninja"
step "configuring the consumer project with find_package(memcoord) (CMAKE_PREFIX_PATH=$prefix)"
# shellcheck disable=SC2086
cmake -S "$source/tests/install/consumer" -B "$work/consumer" $generator -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-configure.log" 2>&1 ||
  { cat "$work/consumer-configure.log" >&2; fail "configuring the consumer"; }
step "building it (links memcoord::worker and memcoord::capi)"
cmake --build "$work/consumer" > "$work/consumer-build.log" 2>&1 ||
  { tail -40 "$work/consumer-build.log" >&2; fail "building the consumer"; }

export MEMCOORD_BACKEND=host
unset MEMCOORD_COORDINATOR
"$work/consumer/consumer_capi" || fail "consumer_capi"
"$work/consumer/consumer_worker" || fail "consumer_worker"
# The consumer found the installed library, not the build tree's.
ldd "$work/consumer/consumer_capi" | grep -q "$prefix/lib/libmemcoord_capi.so" ||
  { ldd "$work/consumer/consumer_capi" >&2; fail "consumer_capi does not load the installed libmemcoord_capi.so"; }
step "passed"
