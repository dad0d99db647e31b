#!/bin/sh
# pip_install_test.sh PYTHON SOURCE_DIR WORK_DIR CAPI_LIB: installs the package offline (pip install
# --no-build-isolation, no index) from a copy of python/, into WORK_DIR/site, then imports it from there with
# MEMCOORD_CAPI_LIB unset (the library must come from inside the package) and runs the ctypes tests.
# Then the README's own steps, in a copy of the repository's layout at another path (WORK_DIR/repo: python/
# and the built library in build/release/lib/, found there without MEMCOORD_CAPI_LIB):
# `python3 -m venv --system-site-packages` and `pip install --no-build-isolation ./python`; the library
# it packaged must search no empty (current-directory) element for its own libraries; without torch the
# build says that it skipped the shim; a reinstall over the first ships nothing an earlier build left behind;
# pip uninstall removes the package; pip wheel makes a wheel with the library inside.
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
for shim_file in torch_shim.cpp block_devices.h; do  # the shim's sources, for a build on first use
  [ -f "$work/site/memcoord/csrc/$shim_file" ] || fail "the installed package has no memcoord/csrc/$shim_file"
done
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
echo "pip_install_test: --target install passed"

# --- The README's steps, from a copy of the repository's layout at another path ---------------------------
unset PYTHONPATH
repo="$work/repo"
venv="$work/venv"
mkdir -p "$repo/build/release/lib"
cp -r "$source/python" "$repo/python"
rm -rf "$repo/python/build" "$repo/python"/*.egg-info "$repo/python/memcoord/lib"
cp "$capi" "$repo/build/release/lib/libmemcoord_capi.so"
"$python" -m venv --system-site-packages "$venv" > "$work/venv.log" 2>&1 ||
  { cat "$work/venv.log" >&2; fail "$python -m venv: install python3-venv (./run setup does)"; }
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
shim_env=""
shim_message="torch is not importable here: the C++ shim is not built"
if (cd "$work" && "$venv/bin/python" -c "import torch" > /dev/null 2>&1); then
  shim_env="MEMCOORD_TORCH_SHIM=off"  # this test is about the package, not about building the shim
  shim_message="C++ shim skipped (MEMCOORD_TORCH_SHIM=off)"
fi
# readme_install LOG: `pip install --no-build-isolation ./python` from the copy's root, as the README says
# (--no-index: offline here whatever pip's configuration says).
readme_install() {
  (cd "$repo" && env -u MEMCOORD_CAPI_LIB -u MEMCOORD_BUILD_DIR -u MEMCOORD_TORCH_SHIM $shim_env \
    "$venv/bin/pip" install -v --no-build-isolation --no-index --disable-pip-version-check ./python) > "$1" 2>&1 ||
    { tail -30 "$1" >&2; fail "pip install --no-build-isolation ./python in a venv (log: $1)"; }
}
# A module that a later version of the package no longer has: it must not outlive its removal.
echo "gone = True" > "$repo/python/memcoord/_removed_since.py"
readme_install "$work/venv-pip-1.log"
[ -f "$site/memcoord/_removed_since.py" ] || fail "the first install did not install memcoord/_removed_since.py"
grep -q "packaged $repo/build/release/lib/libmemcoord_capi.so (an existing build)" "$work/venv-pip-1.log" ||
  { grep 'memcoord setup' "$work/venv-pip-1.log" >&2; fail "the install did not package the library of $repo/build/release/lib"; }
grep -q "$shim_message" "$work/venv-pip-1.log" ||
  { grep 'memcoord setup' "$work/venv-pip-1.log" >&2; fail "the install did not say '$shim_message'"; }
rm "$repo/python/memcoord/_removed_since.py"
readme_install "$work/venv-pip-2.log"
grep -q "Successfully uninstalled memcoord" "$work/venv-pip-2.log" || fail "the second install did not replace the first"
[ ! -e "$site/memcoord/_removed_since.py" ] ||
  fail "a reinstall still installs memcoord/_removed_since.py, removed from the source since the first install (python/build/ kept it)"

installed_lib="$site/memcoord/lib/libmemcoord_capi.so"
[ -f "$installed_lib" ] || fail "the venv's package has no memcoord/lib/libmemcoord_capi.so"
search=$(readelf -d "$installed_lib" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p')
case ":$search:" in
  *::*) fail "the packaged libmemcoord_capi.so searches '$search' for libraries: an empty element is the current directory" ;;
esac
(cd "$work" && env -u MEMCOORD_CAPI_LIB MEMCOORD_BACKEND=host "$venv/bin/python" -c "
import memcoord
path = memcoord.library_path()
assert path == '$installed_lib', 'memcoord uses ' + path + ', not the library inside the venv'
memcoord.init()
block = memcoord.alloc(1 << 20)
memcoord.free(block)
memcoord.shutdown()
print('pip_install_test: the venv install of memcoord', memcoord.__version__, 'allocated through', path)
") || fail "using the package installed in the venv"

"$venv/bin/pip" wheel --no-build-isolation --no-index --no-deps --disable-pip-version-check -w "$work/wheel" \
  "$repo/python" > "$work/wheel.log" 2>&1 || { tail -30 "$work/wheel.log" >&2; fail "pip wheel"; }
wheel=$(ls "$work/wheel"/memcoord-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || fail "pip wheel made no memcoord wheel"
"$venv/bin/python" -m zipfile -l "$wheel" > "$work/wheel.txt"
grep -q "memcoord/lib/libmemcoord_capi.so" "$work/wheel.txt" || fail "the wheel has no memcoord/lib/libmemcoord_capi.so"
if grep -q "_removed_since" "$work/wheel.txt"; then fail "the wheel carries memcoord/_removed_since.py"; fi

"$venv/bin/pip" uninstall -y --disable-pip-version-check memcoord > "$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log" >&2; fail "pip uninstall memcoord"; }
[ ! -e "$site/memcoord" ] || fail "pip uninstall left $site/memcoord: $(find "$site/memcoord" | head -5 | tr '\n' ' ')"
if (cd "$work" && "$venv/bin/python" -c "import memcoord" > /dev/null 2>&1); then
  fail "memcoord still imports in the venv after pip uninstall"
fi
echo "pip_install_test: README install in a venv, reinstall, pip wheel and pip uninstall passed"
echo "pip_install_test: passed"
