#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) on a scratch copy of its seed corpus (the
# committed corpus is never written), at low priority, PURGATORY_FUZZ_JOBS targets at a time
# (default 1, so a developer's machine keeps a core for others; CI, which has the machine to
# itself, runs 2). Exits non-zero if any target crashes, leaks, breaks a model invariant or is
# missing.
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

jobs=${PURGATORY_FUZZ_JOBS:-1}
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "PURGATORY_FUZZ_JOBS must be a positive integer, got '$jobs'" >&2
  exit 2
fi

# Fuzzes one target; prints its verdict (and, on failure, its log's end); returns non-zero on
# failure.
fuzz_one() {
  local target=$1 binary corpus log
  binary=$(find "$build_dir" -type f -name "$target" -perm -u+x -print -quit)
  if [[ -z $binary ]]; then
    echo "FAIL $target: no binary under $build_dir (configure with -DPURGATORY_BUILD_FUZZERS=ON and clang++)"
    return 1
  fi
  corpus=$work/$target/corpus
  mkdir -p "$corpus" "$work/$target/artifacts"
  cp "$here/corpus/$target"/* "$corpus"/
  log=$work/$target/log
  # -jobs/-workers 1: one process per target.
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
    return 1
  fi
}

# Each target's verdict goes to a file of its own and is printed in the targets' order.
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "== $target: ${seconds}s"
  mkdir -p "$work/$target"
  {
    status=0
    fuzz_one "$target" >"$work/$target.verdict" 2>&1 || status=$?
    echo "$status" >"$work/$target.status"
  } &
done
wait
failed=0
for target in "${targets[@]}"; do
  cat "$work/$target.verdict"
  [[ $(cat "$work/$target.status" 2>/dev/null) == 0 ]] || failed=1
done
exit $failed
