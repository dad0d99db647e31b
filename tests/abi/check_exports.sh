#!/bin/sh
# check_exports.sh LIBRARY: fails (exit 1, listing them) when the shared library's dynamic symbol table
# defines anything other than the C ABI's memcoord_* names and the linker's version node. Reads the table
# with `nm -D --defined-only`.
set -eu
lib=$1
[ -f "$lib" ] || { echo "check_exports: no such library: $lib" >&2; exit 2; }
# nm prints versioned names as name@@MEMCOORD_CAPI_1: the version suffix is cut off.
symbols=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//')
[ -n "$symbols" ] || { echo "check_exports: $lib defines no dynamic symbols (nm failed?)" >&2; exit 2; }
# Accepted: memcoord_* (the ABI) and MEMCOORD_CAPI_1 (the version node nm lists as an absolute symbol).
foreign=$(printf '%s\n' "$symbols" | grep -v -E '^(memcoord_[A-Za-z0-9_]+|MEMCOORD_CAPI_[0-9]+)$' || true)
ours=$(printf '%s\n' "$symbols" | grep -c -E '^memcoord_' || true)
if [ -n "$foreign" ]; then
  count=$(printf '%s\n' "$foreign" | wc -l)
  echo "check_exports: $lib exports $count symbols besides memcoord_* (first 40, demangled):"
  printf '%s\n' "$foreign" | head -40 | c++filt
  exit 1
fi
[ "$ours" -gt 0 ] || { echo "check_exports: $lib exports no memcoord_* symbol" >&2; exit 1; }
echo "check_exports: $lib exports only the C ABI ($ours memcoord_* symbols)"
