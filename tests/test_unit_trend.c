/* Unit tests of the creep detector's slope verdict (curves/trend.c) on
 * synthetic per-step curves: what a leak looks like (a line, a staircase,
 * a line with outliers) is flagged with its slope; what a clean training
 * run looks like (noise from variable lengths, a one-time jump, a warm-up
 * that levels off, a fall) is not. The same table, run through broken
 * detectors (a plain least-squares slope > 0, the rule without its floors,
 * one that never fires), shows that these cases catch a detector that is
 * wrong either way. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "trend.h"

#define N 40
#define KIB 1024.0

static uint64_t rng_state;
static double uniform(void) {   /* splitmix64, in [0, 1) */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return (double)((z ^ (z >> 31)) >> 11) / 9007199254740992.0;
}

static double xs[N];
static void steps_x(void) {
  for (int i = 0; i < N; i++) xs[i] = i;
}

typedef enum { FLAT, NOISE, LINE, STAIRS, SPIKY_LINE, JUMP, LEVELS_OFF, FALLS, NCURVES } curve_t;
static const char *names[] = {"flat", "noise", "line", "stairs", "spiky line", "one jump", "levels off", "falls"};
static const bool creeps[] = {false, false, true, true, true, false, false, false};

/* Curve c, seeded: y bytes per step. */
static void make(curve_t c, uint64_t seed, double *y) {
  rng_state = seed;
  for (int i = 0; i < N; i++) {
    double noise = uniform() * 1024 * KIB;   /* activations of a variable length: 0..1 MiB */
    switch (c) {
    case FLAT: y[i] = 8 * 1024 * KIB; break;
    case NOISE: y[i] = 4 * 1024 * KIB + noise; break;
    case LINE: y[i] = 64 * KIB * i + noise / 16; break;
    case STAIRS: y[i] = 256 * KIB * (i / 5) + noise / 8; break;   /* a leak every 5 steps */
    case SPIKY_LINE: y[i] = 64 * KIB * i + (i % 7 == 3 ? 64 * 1024 * KIB : 0); break;
    case JUMP: y[i] = (i < N / 2 ? 0 : 16 * 1024 * KIB) + noise; break;
    case LEVELS_OFF: y[i] = (i < 8 ? 2 * 1024 * KIB * i : 16 * 1024 * KIB) + noise; break;
    case FALLS: y[i] = 64 * 1024 * KIB - 64 * KIB * i + noise; break;
    default: break;
    }
  }
}

typedef bool (*judge_fn)(const double *x, const double *y, int n);
static bool real_judge(const double *x, const double *y, int n) {
  trend_t t;
  return trend_judge(x, y, n, 512, &t);
}
static bool slope_only(const double *x, const double *y, int n) { (void)x; return trend_ls_slope(y, n) > 0; }
/* The rule without its floors: a monotone trend is not yet creep. */
static bool no_floors(const double *x, const double *y, int n) {
  return trend_theil_sen(x, y, n) > 0 && trend_mann_kendall_z(y, n) >= TREND_Z;
}
static bool never(const double *x, const double *y, int n) { (void)x, (void)y, (void)n; return false; }

/* Cases of the table (every curve, several seeds) the judge gets wrong. */
static int mismatches(judge_fn judge, int seeds) {
  double y[N];
  int wrong = 0;
  steps_x();
  for (int c = 0; c < NCURVES; c++)
    for (int s = 1; s <= seeds; s++) {
      make((curve_t)c, (uint64_t)s, y);
      if (judge(xs, y, N) != creeps[c]) {
        if (judge == real_judge) cr_log_error("%s (seed %d): judged %d", names[c], s, !creeps[c]);
        wrong++;
      }
    }
  return wrong;
}

Test(unit_trend, every_curve_is_judged_right_over_many_seeds) {
  cr_assert_eq(mismatches(real_judge, 200), 0);
}

Test(unit_trend, a_broken_detector_fails_the_same_table) {
  cr_assert_gt(mismatches(slope_only, 20), 0, "a plain slope > 0 flags noise and one-time jumps: the table must catch it");
  cr_assert_gt(mismatches(no_floors, 20), 0, "without the floor rule, one jump or a warm-up is creep: caught");
  cr_assert_gt(mismatches(never, 20), 0, "a detector that never fires must be caught");
}

Test(unit_trend, the_slope_of_a_leak_is_its_bytes_per_step) {
  double y[N];
  trend_t t;
  steps_x();
  make(LINE, 7, y);
  cr_assert(trend_judge(xs, y, N, 512, &t));
  cr_expect_float_eq(t.slope, 64 * KIB, 0.05 * 64 * KIB, "Theil-Sen %.0f, leak 65536 bytes/step", t.slope);
  cr_expect_geq(t.z, TREND_Z);
  cr_expect_eq(t.floors_rising, TREND_WINDOWS - 1);
}

/* Outliers (a huge batch every 7 steps) move a least-squares fit, not the
 * median of pairwise slopes. */
Test(unit_trend, outliers_do_not_move_the_slope) {
  double y[N];
  trend_t t;
  steps_x();
  make(SPIKY_LINE, 1, y);
  trend_judge(xs, y, N, 512, &t);
  cr_expect_float_eq(t.slope, 64 * KIB, 1.0, "Theil-Sen %.0f", t.slope);
  cr_expect_gt(fabs(trend_ls_slope(y, N) - 64 * KIB), 64 * KIB, "the plain fit is off by more than the slope itself");
}

Test(unit_trend, exact_values) {
  double x[] = {0, 1, 2, 3, 4}, line[] = {1, 3, 5, 7, 9}, flat[] = {2, 2, 2, 2};
  cr_expect_float_eq(trend_theil_sen(x, line, 5), 2.0, 1e-12);
  cr_expect_float_eq(trend_ls_slope(line, 5), 2.0, 1e-12);
  cr_expect_float_eq(trend_theil_sen(x, flat, 4), 0.0, 1e-12);
  cr_expect_float_eq(trend_ls_slope(line, 1), 0.0, 1e-12, "one point has no slope");
  /* 10 rising points: S = 45, var = 10*9*25/18 = 125, z = 44/sqrt(125) */
  double up[10];
  for (int i = 0; i < 10; i++) up[i] = i;
  cr_expect_float_eq(trend_mann_kendall_z(up, 10), 44 / sqrt(125.0), 1e-12);
  cr_expect_float_eq(trend_mann_kendall_z(flat, 4), 0.0, 1e-12);
}

Test(unit_trend, too_few_points_are_not_judged) {
  double y[TREND_MIN_POINTS - 1];
  trend_t t;
  steps_x();
  for (int i = 0; i < TREND_MIN_POINTS - 1; i++) y[i] = 1e6 * i;
  cr_expect_not(trend_judge(xs, y, TREND_MIN_POINTS - 1, 512, &t));
  cr_expect_not(t.judged);
}

/* A rise below min_rise (reserved memory moving by less than two pages)
 * is no creep, however steady. */
Test(unit_trend, a_rise_below_the_minimum_is_not_creep) {
  double y[N];
  trend_t t;
  steps_x();
  for (int i = 0; i < N; i++) y[i] = 1000 + i;
  cr_expect_not(trend_judge(xs, y, N, 4 << 20, &t));
  cr_expect(trend_judge(xs, y, N, 1, &t));
}

/* More points than TREND_MAX_POINTS are thinned, and still judged. */
Test(unit_trend, long_series_are_thinned) {
  enum { M = 5000 };
  static double x[M], y[M];
  trend_t t;
  rng_state = 3;
  for (int i = 0; i < M; i++) x[i] = i, y[i] = 100.0 * i + uniform() * 1e4;
  cr_expect(trend_judge(x, y, M, 512, &t));
  cr_expect_float_eq(t.slope, 100.0, 5.0, "%.1f", t.slope);
  for (int i = 0; i < M; i++) y[i] = uniform() * 1e6;
  cr_expect_not(trend_judge(x, y, M, 512, &t));
}
