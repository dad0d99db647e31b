#!/bin/sh
# pip_install_test.sh PYTHON SOURCE_DIR WORK_DIR CAPI_LIB: installs the package offline the way the README says
# (pip install --no-build-isolation, no index) from a copy of python/, into WORK_DIR/site, then imports it from
# there with MEMCOORD_CAPI_LIB unset (the library must come from inside the package) and runs the ctypes tests.
set -eu
python=$1
source=$2
work=$3
capi=$4
rm -rf "$work"
mkdir -p "$work"
fail() { echo "pip_install_test: FAILED: $*" >&2; exit 1; }

"$python" -m pip --version > /dev/null 2>&1 || fail "$python has no pip: install python3-pip (./run setup does)"
cp -r "$source/python" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info "$work/src/memcoord/lib"
MEMCOORD_CAPI_LIB="$capi" MEMCOORD_TORCH_SHIM=off "$python" -m pip install --no-build-isolation --no-deps --no-index \
  --disable-pip-version-check --target "$work/site" "$work/src" > "$work/pip.log" 2>&1 ||
  { tail -30 "$work/pip.log" >&2; fail "pip install"; }
[ -f "$work/site/memcoord/lib/libmemcoord_capi.so" ] || fail "the installed package has no memcoord/lib/libmemcoord_capi.so"
[ -f "$work/site/memcoord/csrc/torch_shim.cpp" ] || fail "the installed package has no memcoord/csrc/torch_shim.cpp"
echo "pip_install_test: installed $(ls "$work/site" | tr '\n' ' ')"

unset MEMCOORD_CAPI_LIB
export PYTHONPATH="$work/site:$source/tests/python" MEMCOORD_BACKEND=host PYTHONDONTWRITEBYTECODE=1 MEMCOORD_TEST_STRICT=1
cd "$work"
"$python" -c "
import memcoord, sys
path = memcoord.library_path()
assert path.startswith('$work/site/'), 'memcoord uses ' + path + ', not the library inside the installed package'
print('pip_install_test: memcoord', memcoord.__version__, 'from', memcoord.__file__, 'uses', path)
" || fail "importing the installed package"
"$python" -m unittest test_capi test_step || fail "the ctypes tests against the installed package"
echo "pip_install_test: passed"
