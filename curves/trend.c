/* Trends of per-step series (see trend.h). */
#include "trend.h"

#include <math.h>
#include <stdlib.h>

double trend_ls_slope(const double *y, int n) {
  if (n < 2) return 0.0;
  double mx = (n - 1) / 2.0, my = 0.0, sxy = 0.0, sxx = 0.0;
  for (int i = 0; i < n; i++) my += y[i];
  my /= n;
  for (int i = 0; i < n; i++) {
    sxy += (i - mx) * (y[i] - my);
    sxx += (i - mx) * (i - mx);
  }
  return sxy / sxx;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double trend_theil_sen(const double *x, const double *y, int n) {
  if (n < 2) return 0.0;
  size_t pairs = (size_t)n * (size_t)(n - 1) / 2, k = 0;
  double *s = malloc(pairs * sizeof *s);
  if (!s) return trend_ls_slope(y, n);   /* no host memory: the plain fit */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) s[k++] = (y[j] - y[i]) / (x[j] - x[i]);
  qsort(s, k, sizeof *s, by_value);
  double median = k % 2 ? s[k / 2] : (s[k / 2 - 1] + s[k / 2]) / 2.0;
  free(s);
  return median;
}

double trend_mann_kendall_z(const double *y, int n) {
  if (n < 3) return 0.0;
  double s = 0.0;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) s += (y[j] > y[i]) - (y[j] < y[i]);
  double var = n * (n - 1.0) * (2.0 * n + 5.0) / 18.0;
  /* the continuity correction: S moves in steps of 2 */
  return s > 0 ? (s - 1) / sqrt(var) : s < 0 ? (s + 1) / sqrt(var) : 0.0;
}

static double min_of(const double *y, int n) {
  double m = y[0];
  for (int i = 1; i < n; i++) m = y[i] < m ? y[i] : m;
  return m;
}

static double mean_of(const double *y, int n) {
  double m = 0;
  for (int i = 0; i < n; i++) m += y[i];
  return m / n;
}

/* The floors of TREND_WINDOWS consecutive windows, and how many rose by
 * at least TREND_FLOOR_SHARE of what the slope predicts between them: a
 * leak lifts every floor by its slope; growth that stopped early (a cache
 * filling up, a warm-up longer than expected) lifts none of the later
 * ones, and noise lifts them by chance only, by little. */
static void floors(const double *x, const double *y, int n, trend_t *t) {
  double prev = 0.0, prev_x = 0.0;
  for (int w = 0; w < TREND_WINDOWS; w++) {
    int lo = n * w / TREND_WINDOWS, hi = n * (w + 1) / TREND_WINDOWS;
    double f = min_of(y + lo, hi - lo), cx = mean_of(x + lo, hi - lo);
    if (w == 0) t->floor_first = f;
    else if (f - prev > 0 && f - prev >= TREND_FLOOR_SHARE * t->slope * (cx - prev_x)) t->floors_rising++;
    prev = f;
    prev_x = cx;
  }
  t->floor_last = prev;
}

bool trend_judge(const double *x, const double *y, int n, double min_rise, trend_t *out) {
  *out = (trend_t){0};
  if (n < TREND_MIN_POINTS) return false;
  out->judged = true;
  /* Thinned evenly to at most TREND_MAX_POINTS, the first and last kept. */
  double tx[TREND_MAX_POINTS], ty[TREND_MAX_POINTS];
  int m = n < TREND_MAX_POINTS ? n : TREND_MAX_POINTS;
  for (int i = 0; i < m; i++) {
    int k = m > 1 ? (int)((long long)i * (n - 1) / (m - 1)) : 0;
    tx[i] = x[k];
    ty[i] = y[k];
  }
  out->slope = trend_theil_sen(tx, ty, m);
  out->z = trend_mann_kendall_z(ty, m);
  floors(x, y, n, out);   /* every point: thinning could skip a minimum */
  out->creeps = out->slope > 0 && out->z >= TREND_Z && out->floors_rising == TREND_WINDOWS - 1 &&
                out->floor_last - out->floor_first >= min_rise;
  return out->creeps;
}
