#!/usr/bin/env bash
# The 50-step multimodal workload (kernels/workload.c) under cudalloc: memory
# and time figures, side by side in one run. It prints figures; it passes or
# fails nothing (the workload's own verdict is shown as it said it).
#
#   bench/bench_workload.sh          on the simulated device: expandable segments
#                                    vs expandable_segments:false, and the same
#                                    program on host malloc for the step time
#   bench/bench_workload.sh --cuda   on a GPU: build/workload-cuda plain (the
#                                    driver's cudaMalloc/cudaFree) vs preloaded, and
#                                    on the driver's cudaMallocAsync pool
#                                    (build/gpu/workload-cuda-pool)
#
# Where each figure comes from:
#   peak allocated, peak reserved, reserved/allocated at peak: the workload's
#     summary line (cudalloc_get_stats; allocated = what the program asked for)
#   backend calls per step: bench/step_spy.c, preloaded in front of
#     libcudalloc.so, writes cudalloc's counters at the end of every step; the
#     calls of steps WARMUP..STEPS-1 are divided by their number
#   ms/step: the median of the workload's per-step times after the warm-up,
#     and the mean over every step as the workload prints it
#   wall s: the whole process, start-up and exit included
#
# Environment: BUILD (build), BENCH_STEPS (50), BENCH_WARMUP (10).
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
STEPS=${BENCH_STEPS:-50}
WARMUP=${BENCH_WARMUP:-10}
OUTDIR=$BUILD/bench/workload
LIB=$PWD/$BUILD/libcudalloc.so
SPY=$PWD/$BUILD/bench/libstepspy.so
mkdir -p "$OUTDIR" || exit 1

now() { date +%s.%N; }

# The value after "<label> " on the workload's summary line.
summary_value() { grep '^summary:' "$1" | grep -o "$2 [0-9.]*" | head -1 | awk '{print $NF}'; }

# The median of the per-step times (last column) of steps >= WARMUP.
median_step_ms() {
  awk -v w="$WARMUP" '$1 ~ /^[0-9]+$/ && NF == 11 && $1 >= w {print $11}' "$1" | sort -g |
    awk '{v[NR] = $1} END {if (!NR) print "n/a"; else if (NR % 2) print v[(NR + 1) / 2];
                           else printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

mean_step_ms() { grep -o '([0-9.]* ms/step)' "$1" | tr -d '()' | awk '{print $1}'; }

# Backend calls per step over steps WARMUP..last, from the spy's file:
# "memory events waits slow-paths" (memory: reserve, va_free, create,
# release, map, unmap, set_access; events: records and queries; waits: syncs).
calls_per_step() {
  awk -v w="$WARMUP" '
    NR == 1 { for (i = 2; i <= NF; i++) col[$i] = i; next }
    function sum(names,   n, k, s, parts) {
      n = split(names, parts, ","); s = 0
      for (k = 1; k <= n; k++) s += $(col[parts[k]])
      return s
    }
    {
      m = sum("backend_reserve,backend_va_free,backend_create,backend_release," \
              "backend_map,backend_unmap,backend_set_access")
      e = sum("backend_event_record,backend_event_query"); s = sum("backend_sync"); r = sum("num_retries")
      k = sum("backend_event_record")
      if ($1 == w - 1) { m0 = m; e0 = e; s0 = s; r0 = r; k0 = k; base = 1 }
      last = $1; m1 = m; e1 = e; s1 = s; r1 = r; k1 = k
    }
    END {
      if (!base || last < w) { print "n/a n/a n/a n/a n/a"; exit }
      n = last - w + 1
      printf "%.2f %.2f %.2f %.2f %.2f\n", (m1 - m0) / n, (e1 - e0) / n, (k1 - k0) / n, (s1 - s0) / n, (r1 - r0) / n
    }' "$1"
}

ROWS=()
FAILED=0   # runs that printed no figures: the exit status says so

# run <name> <CUDALLOC_CONF or "-" for no cudalloc> <program> [program options]
run() {
  local name=$1 conf=$2 prog=$3 extra=${4:-} log=$OUTDIR/$1.log steps=$OUTDIR/$1-steps.txt t0 t1 rc
  rm -f "$steps"
  t0=$(now)
  if [ "$conf" = "-" ]; then
    "$prog" --steps "$STEPS" --svg "$OUTDIR/$name.svg" $extra > "$log" 2>&1
  else
    LD_PRELOAD="$SPY $LIB" CUDALLOC_BENCH_STEPS=$steps CUDALLOC_CONF="$conf,report:$OUTDIR/$name" \
      "$prog" --steps "$STEPS" --svg "$OUTDIR/$name.svg" $extra > "$log" 2>&1
  fi
  rc=$?
  t1=$(now)
  local wall verdict alloc reserved ratio calls
  wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}')
  verdict=$(grep -o '^verdict: .*' "$log" | sed 's/^verdict: //')
  [ "$rc" -ne 0 ] && [ -z "$verdict" ] && verdict="exit $rc (see $log)"
  grep -q '^summary:' "$log" || FAILED=$((FAILED + 1))
  echo "--- $name: $prog $extra, CUDALLOC_CONF=${conf/#-/(no cudalloc)}"
  grep -E '^(summary|cudalloc:)' "$log"
  if [ "$conf" = "-" ]; then
    alloc=n/a reserved=n/a ratio=n/a calls="n/a n/a n/a n/a n/a"
  else
    alloc=$(summary_value "$log" "peak allocated")
    reserved=$(summary_value "$log" "peak reserved")
    ratio=$(summary_value "$log" "reserved/allocated at peak")
    if [ -s "$steps" ]; then calls=$(calls_per_step "$steps"); else calls="n/a n/a n/a n/a n/a"; fi
  fi
  local median mean
  median=$(median_step_ms "$log")
  mean=$(mean_step_ms "$log" | grep . || echo n/a)
  set -- $calls
  ROWS+=("| $name | ${alloc:-n/a} | ${reserved:-n/a} | ${ratio:-n/a} | $1 | $2 | $3 | $4 | $5 | $median | $mean | $wall |\
 ${verdict:-n/a} |")
  echo
}

table() {
  echo "| run | peak allocated MiB | peak reserved MiB | reserved/allocated at peak (target <= 1.05)" \
       "| memory calls/step after warm-up (target 0) | event calls/step (target 0 on one stream)" \
       "| of which records (target <= 1) | waits/step | slow paths/step" \
       "| ms/step median, steps $WARMUP.. | ms/step mean | wall s | workload verdict |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
  local r
  for r in "${ROWS[@]}"; do echo "$r"; done
  echo
}

# Step-time ratio of two runs' medians after the warm-up.
ratio_line() {
  local a b
  a=$(median_step_ms "$OUTDIR/$1.log") b=$(median_step_ms "$OUTDIR/$2.log")
  awk -v a="$a" -v b="$b" -v x="$1" -v y="$2" -v t="$3" 'BEGIN {
    if (a + 0 > 0 && b + 0 > 0) printf "step time %s / %s = %.2f (median ms/step after warm-up)%s\n", x, y, a / b, t
    else print "step time ratio: n/a" }'
}

need() {
  local f
  for f in "$@"; do
    [ -e "$f" ] || { echo "bench_workload: $f is missing (make bench builds it)"; exit 1; }
  done
}

sim() {
  need "$LIB" "$SPY" "$BUILD/workload" "$BUILD/workload-host"
  echo "bench_workload: $STEPS steps of the multimodal workload on cudalloc's simulated device ($(nproc) CPUs;"
  echo "the C reference kernels run on the CPU, so step times are CPU times; memory figures are exact)."
  echo
  run expandable "backend:sim" "$BUILD/workload"
  run classic "backend:sim,expandable_segments:false" "$BUILD/workload"
  # a second stream: the batches copied on a non-blocking stream (no legacy queue then)
  run side-stream "backend:sim" "$BUILD/workload" "--side-stream 1"
  run host-malloc - "$BUILD/workload-host"
  table
  ratio_line expandable host-malloc "   (the same C kernels on host malloc: on the CPU the kernels dominate the step)"
}

cuda() {
  need "$LIB" "$SPY" "$BUILD/workload-cuda"
  echo "bench_workload: $STEPS steps of build/workload-cuda on the GPU, plain vs preloaded"
  echo
  run plain - "$BUILD/workload-cuda"
  run cudalloc "backend:cuda" "$BUILD/workload-cuda"
  run cudalloc-classic "backend:cuda,expandable_segments:false" "$BUILD/workload-cuda"
  # The driver's own pool (bench/gpu/pool_wrap.c), where it was built.
  [ -x "$BUILD/gpu/workload-cuda-pool" ] && run cudaMallocAsync - "$BUILD/gpu/workload-cuda-pool"
  table
  ratio_line plain cudalloc "   (design target >= 5)"
  ratio_line plain cudalloc-classic ""
  [ -x "$BUILD/gpu/workload-cuda-pool" ] && ratio_line cudaMallocAsync cudalloc "   (design target >= 1)"
  return 0
}

case "${1:-}" in
  "") sim ;;
  --cuda) cuda ;;
  *) echo "usage: bench/bench_workload.sh [--cuda]"; exit 2 ;;
esac
[ "$FAILED" -eq 0 ] || { echo "bench_workload: $FAILED run(s) printed no figures"; exit 1; }
