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
# Starts the persistent server unless one runs for this prefix (then this exits at once).
"$wineserver" -p60 >/dev/null 2>&1 || true
exec "$wine" "$@"
