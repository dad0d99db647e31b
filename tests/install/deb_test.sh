#!/bin/sh
# deb_test.sh BUILD_DIR WORK_DIR: makes the .deb with `cpack -G DEB` from the build's CPack configuration,
# prints its metadata and contents, and checks that the libraries, headers, CLI, launcher and CMake package
# are in it under /usr, and that it depends on the shared libraries the binaries need.
set -eu
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "deb_test: FAILED: $*" >&2; exit 1; }

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work") > "$work/cpack.log" 2>&1 ||
  { tail -40 "$work/cpack.log" >&2; fail "cpack -G DEB"; }
deb=$(ls "$work"/*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack made no .deb (log: $work/cpack.log)"
echo "deb_test: $(basename "$deb") ($(du -h "$deb" | cut -f1))"
dpkg-deb --field "$deb"
dpkg-deb --contents "$deb" > "$work/contents.txt"
echo "deb_test: $(wc -l < "$work/contents.txt") entries; binaries, libraries and the CMake package:"
grep -E '/usr/(bin/|lib/libmemcoord_capi|lib/cmake/memcoord/memcoordConfig.cmake)' "$work/contents.txt" | awk '{print "  " $NF}'

for path in ./usr/bin/memcoord ./usr/bin/memcoord-launch ./usr/lib/libmemcoord_capi.so ./usr/lib/libmemcoord_worker.a \
            ./usr/include/worker/memcoord.h ./usr/lib/cmake/memcoord/memcoordConfig.cmake; do
  grep -q " $path\$" "$work/contents.txt" || fail "$path is not in the package"
done
depends=$(dpkg-deb --field "$deb" Depends)
echo "$depends" | grep -q "libgrpc++" || echo "$depends" | grep -q "libc6" || fail "Depends has no shared-library dependencies: '$depends'"
[ "$(dpkg-deb --field "$deb" Package)" = memcoord ] || fail "the package is not named memcoord"
echo "deb_test: passed"
