#!/usr/bin/env bash
# Browser test of the dashboard (ctest label `browser`): headless Chromium loads the page a live
# coordinator serves (4 workers, a trim, a quota, a killed rank; dashboard_scenario.sh), takes a screenshot
# and checks the page's DOM: four rank bars, the dead rank, trim and death markers in the timelines, the
# leak alert, the read-only mode with the worker token (#token=TOKEN); with #admin=TOKEN, the admin mode and
# its trim button; without a token, no data and a line saying how to give one (the coordinator has tokens).
# Usage: browser_dashboard_test.sh BIN_DIR OUT_DIR. Exits 77 (skipped) when Chromium is absent.
set -uo pipefail
bin=$1
out=$2
here=$(cd "$(dirname "$0")" && pwd)
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$chromium" ]; then
  echo "SKIP: no Chromium (Debian: apt-get install chromium); the dashboard was not checked in a browser"
  exit 77
fi
mkdir -p "$out"
# shellcheck source=dashboard_scenario.sh
source "$here/dashboard_scenario.sh"
trap scenario_stop EXIT
scenario_start "$bin" "$out/scenario" || exit 1

# browse URL ARGS...: headless Chromium, as root too, no GPU, fixed window, no background work. Up to three
# tries of 90 s each: a cold Chromium on a loaded 2-core CI machine once needed more than 60 s for its first
# page (the screenshot, then the first call), while the page itself was fine; each try's time and exit code
# go to chromium.log so a slow browser shows apart from a broken page.
browse() {
  local try rc start
  for try in 1 2 3; do
    start=$SECONDS
    timeout 90 "$chromium" --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
      --no-first-run --no-default-browser-check --disable-extensions --disable-component-update \
      --disable-background-networking --user-data-dir="$out/chromium-profile" --window-size=1400,1000 \
      --virtual-time-budget=3000 "$@" 2>>"$out/chromium.log"
    rc=$?
    echo "browse: try $try of ${*: -1}: exit $rc after $((SECONDS - start)) s" >>"$out/chromium.log"
    [ "$rc" -eq 0 ] && return 0
  done
  echo "browse: Chromium failed three times on ${*: -1} (see $out/chromium.log)" >&2
  return 1
}

scenario_wait_leak "$bin" || exit 1
url="http://127.0.0.1:$HTTP_PORT/"
worker_token=$(head -n 1 "$TOKEN_FILE")
rm -f "$out/dashboard.png"
browse --dump-dom "$url#token=$worker_token" > "$out/dashboard.html"
browse --dump-dom "$url#admin=$ADMIN_TOKEN" > "$out/dashboard-admin.html"
browse --dump-dom "$url" > "$out/dashboard-no-token.html"
browse --screenshot="$out/dashboard.png" "$url#token=$worker_token" > /dev/null

failures=0
expect() {  # expect FILE PATTERN COUNT WHAT: at least COUNT matches of the extended regex
  local n
  n=$(grep -oE "$2" "$1" | wc -l)
  if [ "$n" -lt "$3" ]; then
    echo "FAIL: $4: expected at least $3 of /$2/ in $(basename "$1"), found $n"
    failures=$((failures + 1))
  else
    echo "ok: $4 ($n)"
  fi
}
page=$out/dashboard.html
expect "$page" 'data-ready="1"' 1 "the page loaded its data"
expect "$page" 'class="rank-row [a-z]+" data-rank="[0-3]"' 4 "a memory bar row per rank"
expect "$page" '<svg class="bar"' 4 "an SVG bar per rank"
expect "$page" 'class="seg allocated"' 3 "allocated segments"
expect "$page" 'class="seg cached"' 1 "cached segments"
expect "$page" 'data-rank="3" data-state="dead"' 1 "rank 3 shown dead"
expect "$page" '<svg class="timeline"' 4 "a timeline per rank"
expect "$page" 'class="series allocated"' 4 "allocated lines in the timelines"
expect "$page" 'class="marker trim"' 3 "trim markers"
expect "$page" 'class="marker dead"' 1 "the death marker"
expect "$page" 'class="marker quota"' 1 "the quota marker"
expect "$page" '<tr class="leak">' 1 "the leak alert of rank 2"
expect "$page" 'id="mode" class="mode">read-only' 1 "read-only without the admin token"
expect "$page" 'id="admin-actions" hidden' 1 "no admin button without the admin token"
expect "$out/dashboard-admin.html" 'class="mode admin">admin' 1 "admin mode with the token"
expect "$out/dashboard-admin.html" 'id="admin-actions">' 1 "the trim button shown to the admin"
expect "$out/dashboard-no-token.html" 'this coordinator needs a token: open this page as [^<]*#token=TOKEN' 1 \
  "without a token: how to give one"
if grep -qE 'class="rank-row' "$out/dashboard-no-token.html"; then
  echo "FAIL: without a token the page shows ranks"
  failures=$((failures + 1))
fi
if [ ! -s "$out/dashboard.png" ]; then
  echo "FAIL: no screenshot"
  failures=$((failures + 1))
else
  echo "ok: screenshot $out/dashboard.png ($(stat -c %s "$out/dashboard.png") bytes)"
fi
if [ "$failures" -gt 0 ]; then
  echo "--- coordinator log"; tail -20 "$out/scenario/coordinator.log"
  echo "--- browser tries"; grep '^browse:' "$out/chromium.log"
  exit 1
fi
echo "PASS"
