/* The creep verdict (see verdict.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trend.h"
#include "verdict.h"

#define MIB (1024.0 * 1024.0)
#define KIB 1024.0

static double mean(const double *y, int n) {
  double s = 0.0;
  for (int i = 0; i < n; i++) s += y[i];
  return s / n;
}

static double max_of(const double *y, int n) {
  double m = y[0];
  for (int i = 1; i < n; i++) m = y[i] > m ? y[i] : m;
  return m;
}

/* Adds a rule's short name to the list, once. */
static void add_failed(verdict_t *v, const char *rule) {
  if (strstr(v->failed, rule)) return;
  size_t len = strlen(v->failed);
  snprintf(v->failed + len, sizeof v->failed - len, "%s%s", len ? ", " : "", rule);
}

/* Appends one failed rule (short name, then the explanation) to the reason. */
static void fail(verdict_t *v, const char *rule, const char *fmt, ...) {
  add_failed(v, rule);
  size_t len = v->pass ? 0 : strlen(v->reason);
  if (!v->pass && len + 2 < sizeof v->reason) {
    strcpy(v->reason + len, "; ");
    len += 2;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->reason + len, sizeof v->reason - len, fmt, ap);
  va_end(ap);
  v->pass = false;
}

static void check_reserved(const verdict_input_t *in, verdict_t *v) {
  int w = in->warmup, window = in->steps - w;
  v->plateau = max_of(in->reserved, w > 0 ? w : 1);
  v->final_reserved = in->reserved[in->steps - 1];
  v->reserved_slope = trend_ls_slope(in->reserved + w, window);
  v->slope_limit = fmax(VERDICT_SLOPE_FRAC * v->plateau, 2.0 * in->granule / window);
  v->final_limit = fmax(VERDICT_FINAL_FRAC * v->plateau, in->granule);
  if (v->reserved_slope > v->slope_limit)
    fail(v, "reserved creep", "reserved creep: %+.1f KiB/step over steps %d-%d (limit %.1f)",
         v->reserved_slope / KIB, w, in->steps - 1, v->slope_limit / KIB);
  if (v->final_reserved > v->plateau + v->final_limit)
    fail(v, "reserved creep", "reserved creep: last step %.2f MiB, %.2f MiB above the warm-up plateau %.2f MiB "
         "(limit %.2f)", v->final_reserved / MIB, (v->final_reserved - v->plateau) / MIB,
         v->plateau / MIB, v->final_limit / MIB);
}

static void check_allocated(const verdict_input_t *in, verdict_t *v) {
  int w = in->warmup, window = in->steps - w;
  v->alloc_base = in->allocated[w > 0 ? w - 1 : 0];
  v->alloc_growth = max_of(in->allocated + w, window) - v->alloc_base;
  v->alloc_slope = trend_ls_slope(in->allocated + w, window);
  if (v->alloc_growth > 0.0)
    fail(v, "allocated creep", "allocated creep: live memory at step ends grew by %.2f MiB after the warm-up "
         "(%+.1f KiB/step): a leak", v->alloc_growth / MIB, v->alloc_slope / KIB);
}

static void check_loss(const verdict_input_t *in, verdict_t *v) {
  int k = in->steps / 4 < VERDICT_LOSS_STEPS ? in->steps / 4 : VERDICT_LOSS_STEPS;
  if (k < 1) k = 1;
  v->loss_first = mean(in->loss, k);
  v->loss_last = mean(in->loss + in->steps - k, k);
  if (!(v->loss_last < v->loss_first * (1.0 - VERDICT_LOSS_DROP)))
    fail(v, "loss did not fall", "loss did not fall: %.4f over the first %d steps, %.4f over the last %d",
         v->loss_first, k, v->loss_last, k);
}

void verdict_eval(const verdict_input_t *in, verdict_t *v) {
  memset(v, 0, sizeof *v);
  v->pass = true;
  if (in->steps - in->warmup < VERDICT_MIN_WINDOW || in->warmup < 0) {
    fail(v, "too few steps", "too few steps: %d after a warm-up of %d, need at least %d", in->steps - in->warmup,
         in->warmup, VERDICT_MIN_WINDOW);
    return;
  }
  check_reserved(in, v);
  check_allocated(in, v);
  if (in->exit_bytes > 0.0)
    fail(v, "leak at exit", "leak at exit: %.0f bytes in %ld blocks still allocated", in->exit_bytes,
         in->exit_blocks);
  check_loss(in, v);
  if (v->pass) snprintf(v->reason, sizeof v->reason, "PASS");
}
