#!/bin/sh
# CMAKE_CROSSCOMPILING_EMULATOR of the `windows` preset (cmake/mingw-w64-wine.cmake):
#   wine-run.sh <wine64> <prefix directory> <program.exe> [arguments...]
# Runs a Windows program under Wine, headless, in a Wine prefix of its own (made on first use,
# under a lock, so parallel test runs and builds make it once) and with a wineserver that stays up
# for 60 s after its last client: hundreds of test processes in a row start Wine once, not each.
set -eu
wine=$1
export WINEPREFIX=$2
shift 2
export WINEDEBUG=-all                 # Wine's own diagnostics would mix with the tests' output
export WINEDLLOVERRIDES="mscoree,mshtml=;winemenubuilder.exe=d"  # no Mono/Gecko prompt, no menus
unset DISPLAY WAYLAND_DISPLAY || true      # console programs: no window system, even where one runs
wineserver=$(dirname "$wine")/wineserver
[ -x "$wineserver" ] || wineserver=wineserver

mkdir -p "$WINEPREFIX"
if [ ! -f "$WINEPREFIX/.made" ]; then
  (
    flock 9
    if [ ! -f "$WINEPREFIX/.made" ]; then
      "$wine" wineboot --init >/dev/null 2>&1
      "$wineserver" -w
      touch "$WINEPREFIX/.made"
    fi
  ) 9>"$WINEPREFIX.lock"
fi
# Starts the persistent server unless one runs for this prefix (then `wineserver -p` exits 2 at
# once). The first program after the server starts also starts Wine's own services (services.exe,
# winedevice.exe), which inherit that program's stdout and stderr and live as long as the server:
# a test started first would keep ctest waiting on its output 60 s after it ended. So whoever
# starts the server starts the services, writing nowhere, and the others wait for that under the
# prefix's lock before running their program. (The server and the services outlive this script:
# they must not inherit the lock's descriptor, or they would hold the lock as long as they live.)
(
  flock 9
  if "$wineserver" -p60 </dev/null >/dev/null 2>&1 9>&-; then
    "$wine" wineboot </dev/null >/dev/null 2>&1 9>&- || true
  fi
) 9>"$WINEPREFIX.lock"
# The program's output goes through as it comes (a hang keeps what it printed); what it exits with
# is reported when it fails, and a failure with no output at all is told apart: a test program
# always prints doctest's summary, so silence means Wine did not start it (or it died before
# main), not that a test failed.
# Such a start that failed is tried once more, and said so on stderr: a program that printed
# nothing has run no test, so running it again hides no result (one that fails the same way
# twice still fails). Seen once in a CI run of 495 Windows tests.
log=$(mktemp)
status=$(mktemp)
trap 'rm -f "$log" "$status"' EXIT
run() {
  {
    rc=0
    "$wine" "$@" 2>&1 || rc=$?
    echo "$rc" >"$status"
  } | tee "$log"
  rc=$(cat "$status")
}
run "$@"
if [ "$rc" -ne 0 ] && [ ! -s "$log" ]; then
  echo "wine-run: $(basename "$1") exited with status $rc and wrote nothing: starting it again" >&2
  run "$@"
fi
if [ "$rc" -ne 0 ]; then
  if [ -s "$log" ]; then
    echo "wine-run: $(basename "$1") exited with status $rc" >&2
  else
    echo "wine-run: $(basename "$1") exited with status $rc and wrote nothing:" \
      "Wine failed to start it or it died before main (not a test failure)" >&2
  fi
fi
exit "$rc"
