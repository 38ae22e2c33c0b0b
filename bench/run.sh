#!/usr/bin/env bash
# What `make bench` runs: both benchmarks, one after the other, then their
# tables together. Everything they print is kept in $BUILD/bench/bench.log.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
LOG=$BUILD/bench/bench.log
mkdir -p "$BUILD/bench" || exit 1
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- alloc shim kernels 2>/dev/null || commit="$commit (with uncommitted changes)"
{
  echo "# make bench, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
  echo
  "$BUILD/bench/bench_alloc" ${BENCH_ALLOC_ARGS:-}
  echo
  "$BUILD/bench/bench_pinned" ${BENCH_PINNED_ARGS:-}
  echo
  BUILD=$BUILD bench/bench_workload.sh
} 2>&1 | tee "$LOG"
echo
echo "== summary (the whole output: $LOG) =="
# Each benchmark's tables are its lines that start with "|".
grep '^|' "$LOG"
