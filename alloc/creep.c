/* Creep (see creep.h): per-step samples of every device, their verdict
 * (curves/trend.c judges each series), and their CSV and SVG. */
#include "creep.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "device.h"
#include "log.h"
#include "step.h"
#include "svg.h"
#include "track.h"
#include "trend.h"

#define CSV_SITES 8             /* site columns of the CSV: the biggest */

typedef struct creep_dev_s {
  size_t n, cap;
  unsigned stride, skipped;     /* after thinning: one mark in stride is kept */
  double *step, *allocated, *reserved, *pending;
  int nsites;
  void *site[CA_CREEP_SITES];
  double *live[CA_CREEP_SITES];
  size_t unfollowed;
  int64_t next_due_ms;          /* sample_ms */
} creep_dev_t;

static creep_dev_t creeps[CA_MAX_SLOTS];
static int sources;             /* CA_MARK_* seen */
static int64_t first_tick_ms;
/* A fork child's view of its parent's samples: kept reachable, never used. */
static creep_dev_t abandoned[CA_MAX_SLOTS];

// ----------------------------------------------------------------------------
// Samples
// ----------------------------------------------------------------------------

static bool grow_to(double **a, size_t cap) {
  double *p = realloc(*a, cap * sizeof *p);
  if (p) *a = p;
  return p != NULL;
}

static bool make_room(creep_dev_t *c) {
  if (c->n < c->cap) return true;
  size_t cap = c->cap ? c->cap * 2 : 64;
  bool ok = grow_to(&c->step, cap) && grow_to(&c->allocated, cap) && grow_to(&c->reserved, cap) &&
            grow_to(&c->pending, cap);
  for (int i = 0; ok && i < c->nsites; i++) ok = grow_to(&c->live[i], cap);
  if (ok) c->cap = cap;
  return ok;
}

/* At CA_CREEP_SAMPLES: every other sample goes, and later marks are kept
 * one in stride, so that a long run costs bounded memory and stays evenly
 * covered. */
static void thin(creep_dev_t *c) {
  double *all[4 + CA_CREEP_SITES] = {c->step, c->allocated, c->reserved, c->pending};
  for (int i = 0; i < c->nsites; i++) all[4 + i] = c->live[i];
  for (int k = 0; k < 4 + c->nsites; k++)
    for (size_t i = 0; 2 * i < c->n; i++) all[k][i] = all[k][2 * i];
  c->n = (c->n + 1) / 2;
  c->stride = c->stride ? c->stride * 2 : 2;
}

/* The column of e's site, made when it holds memory and there is room. */
static int column(creep_dev_t *c, ca_site_live_t *e) {
  if (e->series >= 0 || e->bytes <= 0) return e->series;
  if (c->nsites == CA_CREEP_SITES) {
    e->series = -2;   /* said once in the verdict, not retried */
    c->unfollowed++;
    return -1;
  }
  double *col = calloc(c->cap, sizeof *col);   /* zero before it appeared */
  if (!col) return -1;
  c->site[c->nsites] = e->site;
  c->live[c->nsites] = col;
  return e->series = c->nsites++;
}

static void sample(ca_device_t *d, uint64_t step) {
  creep_dev_t *c = &creeps[d->slot];
  if (c->stride && ++c->skipped < c->stride) return;
  c->skipped = 0;
  if (c->n && c->step[c->n - 1] >= (double)step) c->n--;   /* one sample per step: the latest */
  if (c->n == CA_CREEP_SAMPLES) thin(c);
  if (!make_room(c)) return;
  size_t i = c->n++;
  c->step[i] = (double)step;
  c->allocated[i] = (double)d->stats.allocated_bytes.current;
  c->reserved[i] = (double)d->stats.reserved_bytes.current;
  c->pending[i] = (double)(d->stats.active_bytes.current - d->stats.allocated_bytes.current);
  for (int k = 0; k < c->nsites; k++) c->live[k][i] = 0;
  ca_sitelive_t *t = ca_sitelive_of(d);
  for (size_t s = 0; s < t->cap; s++) {
    if (!t->slots[s].used) continue;
    int col = column(c, &t->slots[s]);
    if (col >= 0) c->live[col][i] = (double)t->slots[s].bytes;
  }
}

static void sample_device(ca_device_t *d, void *arg) { sample(d, *(const uint64_t *)arg); }

void ca_creep_mark(int source, uint64_t step) {
  __atomic_or_fetch(&sources, source, __ATOMIC_RELAXED);
  ca_each_device(sample_device, &step);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ca_creep_tick(ca_device_t *d) {
  creep_dev_t *c = &creeps[d->slot];
  int64_t now = now_ms(), zero = 0, every = ca_config.sample_ms;
  if (now < c->next_due_ms) return;
  c->next_due_ms = now + every;
  __atomic_compare_exchange_n(&first_tick_ms, &zero, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  int64_t since = now - __atomic_load_n(&first_tick_ms, __ATOMIC_RELAXED);
  __atomic_or_fetch(&sources, CA_MARK_SAMPLE, __ATOMIC_RELAXED);
  sample(d, ca_step_at_least((uint32_t)(since / every)));
}

void ca_creep_forget(bool abandon) {
  for (int d = 0; d < CA_MAX_SLOTS; d++) {
    creep_dev_t *c = &creeps[d];
    if (abandon) {
      abandoned[d] = *c;
    } else {
      free(c->step);
      free(c->allocated);
      free(c->reserved);
      free(c->pending);
      for (int i = 0; i < c->nsites; i++) free(c->live[i]);
    }
    memset(c, 0, sizeof *c);
  }
  sources = 0;
  first_tick_ms = 0;
}

// ----------------------------------------------------------------------------
// The verdict
// ----------------------------------------------------------------------------

static int by_slope(const void *a, const void *b) {
  double x = ((const ca_creep_site_t *)a)->slope, y = ((const ca_creep_site_t *)b)->slope;
  return x > y ? -1 : x < y;
}

void ca_creep_judge(ca_device_t *d, ca_creep_verdict_t *v) {
  const creep_dev_t *c = &creeps[d->slot];
  memset(v, 0, sizeof *v);
  v->steps = c->n;
  v->unfollowed = c->unfollowed;
  if (c->n) v->first_step = (uint64_t)c->step[0], v->last_step = (uint64_t)c->step[c->n - 1];
  if (c->n < CA_CREEP_MIN_STEPS) return;
  /* The first fifth warms up: caches fill, the largest batch comes by. */
  size_t w = c->n / 5, m = c->n - w;
  v->warmup = w;
  v->judged = true;
  trend_t t;
  /* Reserved memory moves by pages: growth below two is no creep. */
  v->reserved_creeps = trend_judge(c->step + w, c->reserved + w, (int)m, 2.0 * (double)d->page, &t);
  v->reserved_slope = t.slope;
  for (int i = 0; i < c->nsites; i++) {
    if (!trend_judge(c->step + w, c->live[i] + w, (int)m, CA_MIN_BLOCK, &t)) continue;
    v->sites[v->nsites++] = (ca_creep_site_t){c->site[i], t.slope, t.floor_first, t.floor_last};
  }
  qsort(v->sites, (size_t)v->nsites, sizeof v->sites[0], by_slope);
}

static const char *marks_name(void) {
  int s = __atomic_load_n(&sources, __ATOMIC_RELAXED);
  return s == CA_MARK_SYNC ? "cudaDeviceSynchronize (step_on:sync)"
       : s == CA_MARK_SAMPLE ? "every sample_ms"
       : s == CA_MARK_API ? "cudalloc_step()"
       : "several sources";
}

static void report_of(ca_device_t *d, void *arg) {
  FILE *f = arg;
  ca_creep_verdict_t v;
  ca_creep_judge(d, &v);
  char arena[16];
  if (!v.steps) return;
  if (!v.judged) {
    fprintf(f, "cudalloc: creep on device %d%s: not judged, %zu steps marked by %s (at least %d needed)\n",
            d->ordinal, ca_arena_label(d, arena), v.steps, marks_name(), CA_CREEP_MIN_STEPS);
    return;
  }
  fprintf(f, "cudalloc: creep on device %d%s over steps %" PRIu64 "-%" PRIu64 " (%zu marks by %s, the first %zu a warm-up): ",
          d->ordinal, ca_arena_label(d, arena), v.first_step, v.last_step, v.steps, marks_name(), v.warmup);
  if (!v.nsites) fprintf(f, "none: no call site grows step after step\n");
  else fprintf(f, "%d call site%s grow%s step after step\n", v.nsites, v.nsites == 1 ? "" : "s", v.nsites == 1 ? "s" : "");
  char where[512];
  for (int i = 0; i < v.nsites; i++) {
    ca_track_name(v.sites[i].site, where, sizeof where);
    fprintf(f, "cudalloc:   creep: %+.0f bytes/step from %s (live %.0f -> %.0f bytes)\n", v.sites[i].slope, where,
            v.sites[i].from, v.sites[i].to);
  }
  fprintf(f, "cudalloc:   reserved: %+.0f bytes/step, %s\n", v.reserved_slope,
          v.reserved_creeps ? "growing step after step (reserved creep)" : "not growing step after step");
  if (v.unfollowed)
    fprintf(f, "cudalloc:   %zu more call sites held memory at a mark but were not followed (at most %d are)\n",
            v.unfollowed, CA_CREEP_SITES);
}

void ca_creep_report(FILE *f) { ca_each_device(report_of, f); }

// ----------------------------------------------------------------------------
// Files
// ----------------------------------------------------------------------------

/* A device's file: the path itself for device 0, "-devN" after it for
 * others, and "-arenaK" after that for an arena other than the first. */
static bool path_for(const char *tmpl, const ca_device_t *d, char *path, size_t cap) {
  char suffix[32] = "";
  if (d->ordinal || d->arena) snprintf(suffix, sizeof suffix, "-dev%d", d->ordinal);
  if (d->arena) snprintf(suffix + strlen(suffix), sizeof suffix - strlen(suffix), "-arena%d", d->arena);
  if (ca_config_expand_path(tmpl, suffix, path, cap)) return true;
  ca_log("creep: path '%s' is too long; not written", tmpl);
  return false;
}

static double max_of(const double *y, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = y[i] > m ? y[i] : m;
  return m;
}

/* The CSV's site columns: the CSV_SITES biggest at their highest. */
static int top_sites(const creep_dev_t *c, int *cols) {
  int order[CA_CREEP_SITES];
  double top[CA_CREEP_SITES];
  for (int i = 0; i < c->nsites; i++) {
    int k = i;
    top[i] = max_of(c->live[i], c->n);
    for (; k > 0 && top[order[k - 1]] < top[i]; k--) order[k] = order[k - 1];
    order[k] = i;
  }
  int n = c->nsites < CSV_SITES ? c->nsites : CSV_SITES;
  memcpy(cols, order, (size_t)n * sizeof *cols);
  return n;
}

static void csv_quoted(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    if (*s == '"') fputc('"', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void csv_of(ca_device_t *d, void *arg) {
  (void)arg;
  const creep_dev_t *c = &creeps[d->slot];
  char path[CA_CONFIG_PATH_MAX + 16], where[512];
  FILE *f;
  if (!c->n || !path_for(ca_config.creep_csv, d, path, sizeof path)) return;
  if (!(f = fopen(path, "w"))) {
    ca_log("creep: cannot write %s", path);
    return;
  }
  int cols[CSV_SITES], n = top_sites(c, cols);
  fputs("step,allocated_bytes,reserved_bytes,pending_bytes", f);
  for (int k = 0; k < n; k++) {
    ca_track_name(c->site[cols[k]], where, sizeof where);
    fputc(',', f);
    csv_quoted(f, where);
  }
  fputc('\n', f);
  for (size_t i = 0; i < c->n; i++) {
    fprintf(f, "%.0f,%.0f,%.0f,%.0f", c->step[i], c->allocated[i], c->reserved[i], c->pending[i]);
    for (int k = 0; k < n; k++) fprintf(f, ",%.0f", c->live[cols[k]][i]);
    fputc('\n', f);
  }
  if (fclose(f)) ca_log("creep: could not finish %s", path);
}

static void svg_of(ca_device_t *d, void *arg) {
  (void)arg;
  const creep_dev_t *c = &creeps[d->slot];
  char path[CA_CONFIG_PATH_MAX + 16], title[160], note[160];
  if (!c->n || !path_for(ca_config.creep_svg, d, path, sizeof path)) return;
  double *flat = malloc(2 * c->n * sizeof *flat);
  if (!flat) return;
  for (size_t i = 0; i < c->n; i++) {
    flat[i] = (double)d->props.total_bytes;
    flat[c->n + i] = (double)d->limit;
  }
  ca_creep_verdict_t v;
  ca_creep_judge(d, &v);
  char arena[16];
  snprintf(title, sizeof title, "cudalloc device %d%s, %zu steps: creep %s", d->ordinal, ca_arena_label(d, arena), c->n,
           !v.judged ? "not judged" : v.nsites || v.reserved_creeps ? "FOUND" : "none");
  snprintf(note, sizeof note, "x: the marks in order (steps %.0f to %.0f), by %s", c->step[0], c->step[c->n - 1],
           marks_name());
  svg_series_t lines[] = {{"allocated", "#1f77b4", c->allocated, 0},
                          {"reserved", "#d62728", c->reserved, 0},
                          {"pending", "#ff7f0e", c->pending, 0},
                          {"device memory", "#7f7f7f", flat, 1},
                          {"cap", "#000000", flat + c->n, 1}};
  int nlines = d->limit < d->props.total_bytes ? 5 : 4;   /* no cap: the device is the limit */
  if (svg_write(path, title, note, (int)c->n, (int)v.warmup, lines, nlines))
    ca_log("creep: cannot write %s", path);
  free(flat);
}

void ca_creep_write_files(void) {
  if (ca_config.creep_csv[0]) ca_each_device(csv_of, NULL);
  if (ca_config.creep_svg[0]) ca_each_device(svg_of, NULL);
}
