#!/bin/sh
# exported_package_test.sh BUILD_DIR SOURCE_DIR WORK_DIR: what install_test.sh's one consumer does not reach.
#   1. The run-time search paths (RPATH/RUNPATH) of the installed binaries and libraries, and of the build
#      tree's copies of them (the Python package ships the build tree's libmemcoord_capi.so): no empty or
#      relative element (the dynamic loader reads an empty one as the current directory: a library planted
#      there would be loaded), and none into the source or build tree in the installed ones.
#   2. A generated consumer project that does find_package(memcoord CONFIG) and
#      - links every exported memcoord::<name> target, each static one whole (every object file, so a
#        dependency that is missing from the target's link interface fails to link), and runs the result;
#      - compiles every installed header on its own, twice in one file (include guards), with nothing of the
#        source or build tree on the include path; worker/memcoord.h also as C.
#   3. A project in C alone (no C++ enabled) that links memcoord::capi, the C ABI.
# Fails naming the step, the target or the header.
set -eu
name=exported_package_test
. "$(dirname "$0")/install_prefix.sh"

# --- 1. search paths ----------------------------------------------------------------------------------------
# search_path FILE: the RPATH and RUNPATH of FILE, one line each ("" when none).
search_path() {
  readelf -d "$1" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p'
}
# check_search_path FILE INSTALLED(0|1)
check_search_path() {
  search_path "$1" | while IFS= read -r path; do
    # An empty element: leading or trailing ':' or '::' anywhere.
    case ":$path:" in
      *::*) fail "$1 has an empty element in its run-time search path '$path' (the current directory)" ;;
    esac
    old_ifs=$IFS
    IFS=:
    for element in $path; do
      case "$element" in
        /*|'$ORIGIN'*|'${ORIGIN}'*) ;;
        *) fail "$1 has a relative element '$element' in its run-time search path '$path'" ;;
      esac
      if [ "$2" = 1 ]; then
        case "$element" in
          "$source"|"$source"/*|"$build"|"$build"/*)
            fail "the installed $1 searches the source or build tree ('$element' in '$path')" ;;
        esac
      fi
    done
    IFS=$old_ifs
  done
}
checked=0
for file in $(find "$prefix/bin" "$prefix/lib" -maxdepth 1 -type f); do
  head -c 4 "$file" | grep -q 'ELF' || continue
  case "$file" in *.a) continue ;; esac
  check_search_path "$file" 1
  checked=$((checked + 1))
  # The build tree's copy of the same file, where there is one.
  for copy in "$build/bin/$(basename "$file")" "$build/lib/$(basename "$file")"; do
    if [ -f "$copy" ]; then
      check_search_path "$copy" 0
      checked=$((checked + 1))
    fi
  done
done
[ "$checked" -gt 0 ] || fail "no installed binary or shared library to check"
step "$checked binaries and shared libraries (installed and their build-tree copies): run-time search paths are absolute, without empty elements, and the installed ones stay out of the build tree"

# --- 2. the consumer ----------------------------------------------------------------------------------------
consumer="$work/consumer"
mkdir -p "$consumer/headers"
: > "$consumer/headers.cmake"
count=0
for header in $(cd "$prefix/include" && find . -name '*.h' | sed 's|^\./||' | LC_ALL=C sort); do
  name=$(echo "$header" | tr '/.-' '___')
  printf '#include "%s"\n#include "%s"\n' "$header" "$header" > "$consumer/headers/$name.cc"
  echo "list(APPEND header_sources \${CMAKE_CURRENT_SOURCE_DIR}/headers/$name.cc)" >> "$consumer/headers.cmake"
  count=$((count + 1))
done
[ "$count" -gt 0 ] || fail "no header under $prefix/include"
[ -f "$prefix/include/worker/memcoord.h" ] || fail "include/worker/memcoord.h is not installed"
printf '#include "worker/memcoord.h"\n#include "worker/memcoord.h"\nint main(void) { return 0; }\n' > "$consumer/memcoord_h.c"
echo 'int main() { return 0; }' > "$consumer/main.cc"
cat > "$consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(memcoord_exported_package LANGUAGES C CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(memcoord 0.1 CONFIG REQUIRED)
get_property(imported DIRECTORY PROPERTY IMPORTED_TARGETS)
set(exported "")
foreach(target ${imported})
  if(target MATCHES "^memcoord::")
    list(APPEND exported ${target})
  endif()
endforeach()
if(NOT exported)
  message(FATAL_ERROR "find_package(memcoord) gave no memcoord:: target")
endif()
string(REPLACE ";" " " exported_text "${exported}")
message(STATUS "exported targets: ${exported_text}")
set(link_checks "")
foreach(target ${exported})
  string(REPLACE "::" "_" name ${target})
  add_executable(link_${name} main.cc)
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    target_link_libraries(link_${name} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${target}>")
  else()
    target_link_libraries(link_${name} PRIVATE ${target})
  endif()
  list(APPEND link_checks link_${name})
endforeach()
file(WRITE ${CMAKE_BINARY_DIR}/link_checks.txt "${link_checks}")
include(headers.cmake)
add_library(installed_headers OBJECT ${header_sources})
target_link_libraries(installed_headers PRIVATE ${exported})
add_library(memcoord_h_as_c OBJECT memcoord_h.c)
target_link_libraries(memcoord_h_as_c PRIVATE memcoord::capi)
EOF

generator=""
command -v ninja > /dev/null && generator="-G Ninja"
step "configuring a consumer of every exported target (find_package(memcoord CONFIG), CMAKE_PREFIX_PATH=$prefix)"
# shellcheck disable=SC2086
cmake -S "$consumer" -B "$work/consumer-build" $generator -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/configure.log" 2>&1 || { tail -40 "$work/configure.log" >&2; fail "configuring the consumer of every exported target"; }
grep 'exported targets:' "$work/configure.log" | sed 's/^-- /exported_package_test: /'

step "linking each exported target (static ones whole) and compiling $count installed headers one by one"
for target in $(tr ';' ' ' < "$work/consumer-build/link_checks.txt"); do
  cmake --build "$work/consumer-build" --target "$target" > "$work/$target.log" 2>&1 ||
    { grep -E 'error|undefined reference' "$work/$target.log" | head -20 >&2; fail "linking memcoord::${target#link_memcoord_} (log: $work/$target.log)"; }
  (cd "$work" && env -i PATH=/usr/bin:/bin "$work/consumer-build/$target") ||
    fail "the program linked with memcoord::${target#link_memcoord_} does not run"
done
# -k 0: every header that does not compile is named, not only the first.
cmake --build "$work/consumer-build" --target installed_headers memcoord_h_as_c -- -k 0 > "$work/headers.log" 2>&1 || {
  grep -E '(fatal )?error' "$work/headers.log" | sort -u | head -20 >&2
  failed=$(grep -c '^FAILED' "$work/headers.log" || true)
  fail "$failed installed header(s) do not compile on their own (log: $work/headers.log)"
}

# The C ABI from a project in C alone (no C++ enabled): find_package(memcoord) must not need what only its C++
# libraries need (MPI's C++ part cannot be found without C++), and memcoord::capi must link and run.
c_consumer="$work/c-consumer"
mkdir -p "$c_consumer"
cp "$source/tests/install/consumer/capi_main.c" "$c_consumer/"
cat > "$c_consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.25)
project(memcoord_c_consumer LANGUAGES C)
find_package(memcoord 0.1 CONFIG REQUIRED)
add_executable(consumer_capi capi_main.c)
target_link_libraries(consumer_capi PRIVATE memcoord::capi)
EOF
step "a project in C alone: find_package(memcoord), memcoord::capi"
# shellcheck disable=SC2086
cmake -S "$c_consumer" -B "$work/c-consumer-build" $generator -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  > "$work/c-configure.log" 2>&1 || { tail -20 "$work/c-configure.log" >&2; fail "configuring a C-only consumer of memcoord::capi"; }
cmake --build "$work/c-consumer-build" > "$work/c-build.log" 2>&1 ||
  { tail -20 "$work/c-build.log" >&2; fail "building a C-only consumer of memcoord::capi"; }
(cd "$work" && env -i PATH=/usr/bin:/bin MEMCOORD_BACKEND=host "$work/c-consumer-build/consumer_capi") ||
  fail "the C-only consumer of memcoord::capi does not run"
step "passed"
