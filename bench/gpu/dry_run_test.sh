#!/usr/bin/env bash
# CI's test of the GPU check on a machine without a GPU (.ci/run):
#
#   bench/gpu/dry_run_test.sh [DIR]   (default build/gpu-dry)
#
# 1. bash bench/gpu-check.sh without a GPU says so and exits 0;
# 2. the dry run (every step's CPU part) passes and writes DIR;
# 3. bench/gpu/check_results.sh accepts DIR;
# 4. and refuses each broken copy of it: a missing file, a missing or failed
#    section row, a step log missing from the archive, and a backend entry point
#    the driver probe does not probe. Without step 4 the check in step 3 could
#    pass whatever the dry run wrote.
set -u
cd "$(dirname "$0")/../.." || exit 1
dir=${1:-build/gpu-dry}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "dry_run_test: FAILED: $*"; failed=1; }

out=$(env -u GPU_CHECK_FORCE bash bench/gpu-check.sh 2>&1); rc=$?
if command -v nvidia-smi >/dev/null 2>&1 || [ -e /dev/nvidiactl ]; then
  echo "dry_run_test: a GPU may be present: the no-GPU message is not checked"
elif [ "$rc" -ne 0 ] || ! grep -q 'no GPU on this machine' <<< "$out"; then
  fail "without a GPU: exit $rc, '$out'"
fi

bash bench/gpu-check.sh --dry-run "$dir" || fail "the dry run failed (exit $?): see $dir/summary.md"
bash bench/gpu/check_results.sh "$dir" || fail "check_results refused the dry run's results"

# A copy of the results, broken by one command; check_results must refuse it.
refuses() {
  local what=$1 copy=$tmp/copy
  shift
  rm -rf "$copy" && cp -r "$dir" "$copy" && (cd "$copy" && eval "$*")
  if BACKEND_SRC=${BACKEND_SRC_BROKEN:-alloc/backend/cuda_entries.h} bash bench/gpu/check_results.sh "$copy" >/dev/null; then
    fail "check_results accepted results with $what"
  else
    echo "dry_run_test: check_results refuses results with $what"
  fi
}
refuses "no machine.txt" 'rm machine.txt'
refuses "no row for the fences section" "sed -i '/^| fences | /d' summary.md"
refuses "a failed section" "sed -i 's/^| torch | dry run: CPU part ok |/| torch | **FAILED** (1) |/' summary.md"
refuses "a step log missing from the archive" \
  'mkdir x && tar xzf logs.tar.gz -C x && rm x/build/gpu-check/logs/03-build.log && tar czf logs.tar.gz -C x build && rm -r x'
# The backend gains an entry point the probe does not know.
sed 's/^\(  X(stream_is_capturing.*\)$/\1 \\\n  X(mem_new_call, "cuMemNewCall", PFN_cuMemNewCall)/' alloc/backend/cuda_entries.h > "$tmp/cuda.c"
grep -q cuMemNewCall "$tmp/cuda.c" || fail "could not add an entry point to a copy of alloc/backend/cuda_entries.h"
BACKEND_SRC_BROKEN=$tmp/cuda.c refuses "an entry point of the backend that the probe does not probe" ':'

[ "$failed" -eq 0 ] && echo "dry_run_test: ok"
exit "$failed"
