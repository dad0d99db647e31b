# install_prefix.sh, sourced by the tests/install scripts that install the build: with `name` set to the script's
# name and the arguments BUILD_DIR SOURCE_DIR WORK_DIR, sets build, source, work and prefix (WORK_DIR/prefix),
# empties WORK_DIR, defines step and fail (messages that name the script), and runs `cmake --install` into prefix.
build=$1
source=$2
work=$3
prefix="$work/prefix"
rm -rf "$work"
mkdir -p "$work"

step() { echo "$name: $*"; }
fail() { echo "$name: FAILED: $*" >&2; exit 1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" > "$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install"; }
