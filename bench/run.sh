#!/usr/bin/env bash
# What `make bench` runs: bench_alloc's single-thread part pinned to one CPU
# (taskset -c 0, when taskset exists), its thread part unpinned, then the
# workload, then the driver calls on the shared snapshots (TRACES, the
# folder make passes: make economy's table); then every table together.
# Everything is kept in $BUILD/bench/bench.log.
#
# BENCH_SHORT=1: a short run for CI (bench_alloc --pairs 20000 --rounds 3,
# 20 workload steps), well under a minute, so that the benchmarks cannot
# rot; its figures are noisy. Its thread part keeps the full pairs with 5
# rounds (2 s): at 20,000 pairs a tiny phase lasts a millisecond, within
# reach of the gate's wake-up skew (two tiny threads read 1.49 and 1.64
# times one there, 1.93 to 2.00 with full phases). BENCH_ALLOC_ARGS
# replaces bench_alloc's --pairs/--rounds in both parts. BENCH_ARENAS
# (default 1): the thread part again at arenas:N, beside the default's
# two arenas, where threads that contend for the device lock move to
# arenas of their own (arena_spread:contended;
# docs/benchmarks.md, "Arenas, eighth session", "Arenas by contention, tenth
# session", "Exact ordinal peaks at arenas:N, twelfth session"): at 1, the
# allocator of one lock per device; 2 or empty: not run.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
LOG=$BUILD/bench/bench.log
mkdir -p "$BUILD/bench" || exit 1
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD -- alloc shim kernels 2>/dev/null || commit="$commit (with uncommitted changes)"
if [ "${BENCH_SHORT:-0}" = 1 ]; then
  args=${BENCH_ALLOC_ARGS:---pairs 20000 --rounds 3}
  thread_args=${BENCH_ALLOC_ARGS:---rounds 5}
  export BENCH_STEPS=${BENCH_STEPS:-20} BENCH_WARMUP=${BENCH_WARMUP:-8}
else
  args=${BENCH_ALLOC_ARGS:-}
  thread_args=$args
fi
pin=
command -v taskset >/dev/null && pin="taskset -c 0"
status=0
{
  echo "# make bench$([ "${BENCH_SHORT:-0}" = 1 ] && echo " BENCH_SHORT=1"), $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
  echo
  echo "\$ $pin $BUILD/bench/bench_alloc --part single $args"
  $pin "$BUILD/bench/bench_alloc" --part single $args || status=1
  echo
  echo "\$ $BUILD/bench/bench_alloc --part threads $thread_args"
  "$BUILD/bench/bench_alloc" --part threads $thread_args || status=1
  echo
  arenas=${BENCH_ARENAS-1}
  if [ -n "$arenas" ] && [ "$arenas" != 2 ]; then
    echo "\$ $BUILD/bench/bench_alloc --part threads $thread_args --conf ,arenas:$arenas"
    "$BUILD/bench/bench_alloc" --part threads $thread_args --conf ",arenas:$arenas" || status=1
    echo
  fi
  echo "\$ $BUILD/bench/bench_pinned ${BENCH_PINNED_ARGS:-}"
  "$BUILD/bench/bench_pinned" ${BENCH_PINNED_ARGS:-} || status=1
  echo
  echo "\$ bench/bench_workload.sh"
  BUILD=$BUILD bench/bench_workload.sh || status=1
  echo
  if [ -n "${TRACES:-}" ] && ls "$TRACES"/*.pickle >/dev/null 2>&1; then
    echo "\$ $BUILD/cudalloc-replay --economy $TRACES/*.pickle"
    "$BUILD/cudalloc-replay" --economy "$TRACES"/*.pickle || status=1
  else
    echo "driver economy: no snapshots (TRACES=dir, default ../shared/traces): skipped"
  fi
  exit $status
} 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
echo
echo "== summary (the whole output: $LOG) =="
# Each benchmark's tables are its lines that start with "|", under the
# command that printed them (the thread part runs twice: the default arenas
# and arenas:1). Kept in $BUILD/bench/summary.md too (bench/summary_check.sh).
grep -E '^(\||\$ )' "$LOG" | tee "$BUILD/bench/summary.md"
exit "$status"
