/* Does a per-step series grow step after step? The slope logic shared by
 * the core's creep verdict (alloc/creep.c) and the workload's own curve
 * verdict (kernels/verdict.c). Plain C on arrays of doubles, no allocator
 * state, so that both compile it.
 *
 * A series "creeps" when all of these hold over its points:
 * - its Theil-Sen slope (the median of the slopes between every pair of
 *   points: half the points may be outliers without moving it) is positive;
 * - its Mann-Kendall statistic (how many later points are above earlier
 *   ones, less how many are below) is at least TREND_Z standard deviations
 *   above zero: a monotone trend, not noise (p < 0.002 for noise);
 * - its floor rises with the slope: the minimum of each of TREND_WINDOWS
 *   consecutive windows is above the one before by at least
 *   TREND_FLOOR_SHARE of what the slope predicts between them, and by
 *   min_rise in total. Variable activations move a series' top, not its
 *   floor; one jump (a bigger batch that is cached from then on), or growth
 *   that stops (a cache filling up), raises one window's floor, not every
 *   window's; a leak raises every floor.
 * docs/reports.md ("Creep") explains the choice. */
#ifndef CURVES_TREND_H
#define CURVES_TREND_H

#include <stdbool.h>

#define TREND_Z 3.0
#define TREND_WINDOWS 4
#define TREND_FLOOR_SHARE 0.5
#define TREND_MIN_POINTS 8        /* two per window */
#define TREND_MAX_POINTS 256      /* more are thinned evenly (the pairwise statistics are quadratic) */

typedef struct trend_s {
  bool judged;          /* enough points */
  bool creeps;
  double slope;         /* Theil-Sen, y units per x unit */
  double z;             /* Mann-Kendall */
  double floor_first, floor_last;
  int floors_rising;    /* windows whose floor is above the previous one's */
} trend_t;

/* Least-squares slope of y[0..n) against 0..n-1; 0 when n < 2. */
double trend_ls_slope(const double *y, int n);
/* Theil-Sen slope of y against x (x strictly increasing); 0 when n < 2. */
double trend_theil_sen(const double *x, const double *y, int n);
/* Mann-Kendall z of y[0..n) (no tie correction, which only makes it
 * smaller: conservative); 0 when n < 3. */
double trend_mann_kendall_z(const double *y, int n);
/* The judgement above of y against x over n points. Returns out->creeps. */
bool trend_judge(const double *x, const double *y, int n, double min_rise, trend_t *out);

#endif /* CURVES_TREND_H */
