#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) on a scratch copy of its seed corpus (the
# committed corpus is never written), one target at a time, at low priority. Exits non-zero if
# any target crashes, leaks, breaks a model invariant or is missing.
#   tests/fuzz/run_smoke.sh build/fuzz 60
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  echo "usage: $0 BUILD_DIR [SECONDS]" >&2
  exit 2
fi
build_dir=$1
seconds=${2:-60}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
targets=(fuzz_request_decoder fuzz_record_batch fuzz_timer_purgatory_model fuzz_purgatory_concurrent)

work=$(mktemp -d "${TMPDIR:-/tmp}/purgatory-fuzz-smoke.XXXXXX")
trap 'rm -rf "$work"' EXIT

failed=0
for target in "${targets[@]}"; do
  binary=$(find "$build_dir" -type f -name "$target" -perm -u+x -print -quit)
  if [[ -z $binary ]]; then
    echo "FAIL $target: no binary under $build_dir (configure with -DPURGATORY_BUILD_FUZZERS=ON and clang++)"
    failed=1
    continue
  fi
  corpus=$work/$target/corpus
  mkdir -p "$corpus" "$work/$target/artifacts"
  cp "$here/corpus/$target"/* "$corpus"/
  log=$work/$target/log
  echo "== $target: ${seconds}s"
  # -jobs/-workers 1: one process, so the machine keeps a core for others.
  if nice -n 10 "$binary" -max_total_time="$seconds" -print_final_stats=1 -timeout=25 \
      -rss_limit_mb=2048 -artifact_prefix="$work/$target/artifacts/" "$corpus" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "ok   $target: $runs runs, $rate exec/s"
  else
    echo "FAIL $target (exit $?); last lines of its log:"
    tail -n 40 "$log"
    for artifact in "$work/$target/artifacts"/*; do
      [[ -e $artifact ]] || continue
      mkdir -p "$build_dir/fuzz-artifacts"
      cp "$artifact" "$build_dir/fuzz-artifacts/$target-$(basename "$artifact")"
      echo "     input kept: $build_dir/fuzz-artifacts/$target-$(basename "$artifact")"
    done
    failed=1
  fi
done
exit $failed
