/* The creep verdict of a training run, from its per-step memory series.
 *
 * Rules (docs/workload.md justifies each threshold):
 * - reserved memory after the warm-up must not trend upward: the least-
 *   squares slope (curves/trend.c) over steps [warmup, steps) stays below
 *   max(VERDICT_SLOPE_FRAC x plateau, 2 x granule / window);
 * - the last step's reserved memory stays within
 *   max(VERDICT_FINAL_FRAC x plateau, 1 granule) of the plateau (the highest
 *   reserved memory of the warm-up);
 * - allocated memory at the end of each step (every activation freed) never
 *   rises above its value at the end of the warm-up: that is a leak;
 * - nothing is still allocated at exit, once the program freed everything;
 * - the loss falls: the mean of the last few steps is at least
 *   VERDICT_LOSS_DROP below the mean of the first few.
 */
#ifndef KERNELS_VERDICT_H
#define KERNELS_VERDICT_H

#include <stdbool.h>

#define VERDICT_SLOPE_FRAC 0.001   /* of the plateau, per step */
#define VERDICT_FINAL_FRAC 0.05    /* of the plateau */
#define VERDICT_LOSS_DROP 0.10     /* relative */
#define VERDICT_MIN_WINDOW 3       /* steps after the warm-up */
#define VERDICT_LOSS_STEPS 5       /* steps averaged at each end */

typedef struct verdict_input_s {
  int steps, warmup;
  const double *loss;        /* per step */
  const double *allocated;   /* bytes live at each step's end */
  const double *reserved;    /* bytes reserved at each step's end */
  double granule;            /* bytes: the unit reserved memory moves by */
  double exit_bytes;         /* still allocated after the program freed everything */
  long exit_blocks;
} verdict_input_t;

typedef struct verdict_s {
  bool pass;
  double plateau, final_reserved, final_limit;
  double reserved_slope, slope_limit;   /* bytes per step */
  double alloc_base, alloc_growth, alloc_slope;
  double loss_first, loss_last;
  char reason[512];                     /* "PASS" or the failed rules, "; " apart */
  char failed[128];                     /* the failed rules' short names, ", " apart */
} verdict_t;

void verdict_eval(const verdict_input_t *in, verdict_t *out);

#endif /* KERNELS_VERDICT_H */
