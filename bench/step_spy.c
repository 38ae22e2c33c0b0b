/* A preload library for bench/bench_workload.sh: it stands in front of
 * libcudalloc.so's cudalloc_step (the workload calls it at the end of every
 * step), passes the call on, then appends one line of cudalloc's cumulative
 * counters to the file $CUDALLOC_BENCH_STEPS, so that the script can count
 * the backend calls of every step after the warm-up.
 *
 *   LD_PRELOAD="build/bench/libstepspy.so build/libcudalloc.so" \
 *     CUDALLOC_BENCH_STEPS=steps.txt CUDALLOC_CONF=backend:sim build/workload
 *
 * It links nothing of cudalloc: both functions are found at run time. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "cudalloc.h"

typedef void (*step_fn)(void);
typedef cudaError_t (*stats_fn)(int device, cudalloc_stats_t *out);

static FILE *out;
static int step;

static void header(FILE *f) {
  fprintf(f, "step");
#define SPY_NAME(name, doc) fprintf(f, " %s", #name);
  CUDALLOC_STAT_COUNTS(SPY_NAME)
#undef SPY_NAME
  fprintf(f, "\n");
}

__attribute__((visibility("default"))) void cudalloc_step(void) {
  static step_fn real_step;
  static stats_fn get_stats;
  if (!real_step) {
    real_step = (step_fn)dlsym(RTLD_NEXT, "cudalloc_step");
    get_stats = (stats_fn)dlsym(RTLD_DEFAULT, "cudalloc_get_stats");
  }
  if (real_step) real_step();
  const char *path = getenv("CUDALLOC_BENCH_STEPS");
  if (!path || !get_stats) return;
  if (!out) {
    if (!(out = fopen(path, "w"))) return;
    header(out);
  }
  cudalloc_stats_t s;
  if (get_stats(-1, &s) != cudaSuccess) return;
  fprintf(out, "%d", step++);
#define SPY_VALUE(name, doc) fprintf(out, " %" PRId64, s.name.total);
  CUDALLOC_STAT_COUNTS(SPY_VALUE)
#undef SPY_VALUE
  fprintf(out, "\n");
  fflush(out);
}
