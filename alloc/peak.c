/* The peak report (see peak.h): copies of the per-site live totals taken
 * when a peak is left, printed biggest first. */
#include "peak.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "arena.h"
#include "creep.h"
#include "device.h"
#include "log.h"
#include "step.h"
#include "track.h"

/* A copy; where it was taken (taken_at) is the device's peak_taken. */
typedef struct snap_s {
  bool sorted;
  int64_t live;
  uint64_t step;
  size_t n, cap;
  ca_site_live_t *sites;
} snap_t;

typedef struct peak_dev_s {
  snap_t snap[CA_PEAK_KINDS];
  uint64_t alloc_peak_step;     /* the step of the allocation that reached the peak */
} peak_dev_t;

static peak_dev_t peaks[CA_MAX_SLOTS];
/* Kept on the device (types.h), addressed from the base its stats use, so
 * that the test each allocation and free makes touches nothing else: the
 * value each copy was taken at (0: none; a copy is of a peak above 0), and
 * the frees (allocated) or allocations (reserved) since. A device is made
 * anew (calloc) after every ca_peak_forget: both start at 0 with it. */
_Static_assert(sizeof ((ca_device_t *)0)->peak_since / sizeof(uint64_t) == CA_PEAK_KINDS, "a count per kind");
_Static_assert(sizeof ((ca_device_t *)0)->peak_taken / sizeof(int64_t) == CA_PEAK_KINDS, "a copy per kind");
/* A fork child's view of its parent's copies: kept reachable, never used. */
static peak_dev_t abandoned[CA_MAX_SLOTS];

static cudalloc_stat_t *stat_of(ca_device_t *d, ca_peak_kind_t k) {
  return k == CA_PEAK_ALLOCATED ? &d->stats.allocated_bytes : &d->stats.reserved_bytes;
}

/* The amortization of peak.h: a copy costs O(sites), paid for by the
 * `since` operations before it, or by a rise of 1/64. */
static bool due(const ca_device_t *d, ca_peak_kind_t k, int64_t peak) {
  int64_t taken = d->peak_taken[k];
  if (!taken) return true;
  if (peak <= taken) return false;
  return peak - taken >= taken / 64 || d->peak_since[k] >= ca_sitelive_of(d)->used;
}

static void copy(ca_device_t *d, ca_peak_kind_t k, int64_t value, uint64_t step) {
  snap_t *s = &peaks[d->slot].snap[k];
  ca_sitelive_t *t = ca_sitelive_of(d);
  if (s->cap < t->used + 1) {
    size_t cap = 2 * (t->used + 1);
    ca_site_live_t *p = realloc(s->sites, cap * sizeof *p);
    if (!p) return;   /* no host memory: the older copy stays, and says where it was taken */
    s->sites = p;
    s->cap = cap;
  }
  s->n = ca_sitelive_copy(t, s->sites);
  s->sorted = false;
  ca_assert(value > 0);
  d->peak_taken[k] = value;
  s->live = d->stats.allocated_bytes.current;
  s->step = step;
  d->peak_since[k] = 0;
}

/* What an allocation or a free may have to do besides counting: out of
 * line, so that the common case (no peak reached, no sampling) makes no
 * call and saves no registers. */
static __attribute__((noinline)) void alloc_rare(ca_device_t *d) {
  const cudalloc_stat_t *a = &d->stats.allocated_bytes, *r = &d->stats.reserved_bytes;
  if (a->current == a->peak) peaks[d->slot].alloc_peak_step = ca_step_current();
  if (r->current == r->peak && due(d, CA_PEAK_RESERVED, r->peak)) copy(d, CA_PEAK_RESERVED, r->current, ca_step_current());
  if (ca_config.sample_ms) ca_creep_tick(d);
}

static __attribute__((noinline)) void free_rare(ca_device_t *d) {
  const cudalloc_stat_t *a = &d->stats.allocated_bytes;
  if (due(d, CA_PEAK_ALLOCATED, a->peak)) copy(d, CA_PEAK_ALLOCATED, a->current, peaks[d->slot].alloc_peak_step);
}

/* A copy may be due only at a peak above the copy's (due()): reserved
 * memory stays at its peak for long, with its copy taken. st->current is
 * above 0 here (the block allocated or being freed counts in it), so a
 * peak_taken of 0 (no copy) is always below it. */
static bool may_be_due(const ca_device_t *d, ca_peak_kind_t k, const cudalloc_stat_t *st) {
  return st->current == st->peak && st->current > d->peak_taken[k];
}

void ca_peak_on_alloc(ca_device_t *d, ca_block_t *b) {
  ca_sitelive_add(ca_sitelive_of(d), b, +1);
  d->peak_since[CA_PEAK_RESERVED]++;
  const cudalloc_stat_t *a = &d->stats.allocated_bytes, *r = &d->stats.reserved_bytes;
  if (a->current == a->peak || may_be_due(d, CA_PEAK_RESERVED, r) || ca_config.sample_ms) alloc_rare(d);
}

void ca_peak_on_free(ca_device_t *d, ca_block_t *b) {
  d->peak_since[CA_PEAK_ALLOCATED]++;
  if (may_be_due(d, CA_PEAK_ALLOCATED, &d->stats.allocated_bytes)) free_rare(d);
  if (!CA_DEBUG(sites_miss_frees)) ca_sitelive_add(ca_sitelive_of(d), b, -1);
  if (ca_config.sample_ms) ca_creep_tick(d);
}

/* While d is at its peak, the copy is made exact. */
static void catch_up(ca_device_t *d, ca_peak_kind_t k) {
  const cudalloc_stat_t *st = stat_of(d, k);
  uint64_t step = k == CA_PEAK_ALLOCATED ? peaks[d->slot].alloc_peak_step : ca_step_current();
  if (st->current == st->peak && st->peak > 0 && d->peak_taken[k] != st->peak) copy(d, k, st->current, step);
}

bool ca_peak_get(ca_device_t *d, ca_peak_kind_t k, ca_peak_t *out) {
  catch_up(d, k);
  snap_t *s = &peaks[d->slot].snap[k];
  if (!d->peak_taken[k]) return false;
  if (!s->sorted) ca_sitelive_sort(s->sites, s->n);
  s->sorted = true;
  *out = (ca_peak_t){stat_of(d, k)->peak, d->peak_taken[k], s->live, s->step, s->n, s->sites};
  return true;
}

void ca_peak_reset(ca_device_t *d) {
  for (int k = 0; k < CA_PEAK_KINDS; k++) {
    peaks[d->slot].snap[k].n = 0;
    d->peak_taken[k] = 0;
  }
  peaks[d->slot].alloc_peak_step = ca_step_current();
}

void ca_peak_device_reset(ca_device_t *d) {
  catch_up(d, CA_PEAK_ALLOCATED);
  catch_up(d, CA_PEAK_RESERVED);
  ca_sitelive_clear(ca_sitelive_of(d));
}

void ca_peak_forget(bool abandon) {
  ca_creep_forget(abandon);
  ca_sitelive_forget(abandon);
  ca_step_reset();
  for (int i = 0; i < CA_MAX_SLOTS; i++) {
    if (abandon) abandoned[i] = peaks[i];
    else
      for (int k = 0; k < CA_PEAK_KINDS; k++) free(peaks[i].snap[k].sites);
    memset(&peaks[i], 0, sizeof peaks[i]);
  }
}

// ----------------------------------------------------------------------------
// The report
// ----------------------------------------------------------------------------

static double mib(int64_t b) { return (double)b / (1 << 20); }

static void print_peak(FILE *f, ca_device_t *d, ca_peak_kind_t k, size_t top) {
  ca_peak_t p;
  if (!ca_peak_get(d, k, &p) || p.peak <= 0) return;
  const char *what = k == CA_PEAK_ALLOCATED ? "allocated" : "reserved";
  char arena[16];   /* per arena: each copy is of its own arena's peak, which the others did not share */
  fprintf(f, "cudalloc: peak %s on device %d%s: %" PRId64 " bytes (%.2f MiB) in step %" PRIu64, what, d->ordinal,
          ca_arena_label(d, arena), p.peak, mib(p.peak), p.step);
  if (k == CA_PEAK_RESERVED) fprintf(f, "; live then %" PRId64 " bytes", p.live);
  fprintf(f, ", held by %zu call site%s%s\n", p.nsites, p.nsites == 1 ? "" : "s", p.nsites ? ":" : "");
  if (p.taken_at != p.peak)
    fprintf(f, "cudalloc:   (composition copied at %" PRId64 " bytes %s, within 1/64 of the peak: see docs/reports.md)\n",
            p.taken_at, what);
  char where[512];
  size_t shown = top && top < p.nsites ? top : p.nsites;
  for (size_t i = 0; i < shown; i++) {
    const ca_site_live_t *e = &p.sites[i];
    if (e->lost) snprintf(where, sizeof where, "(call sites not recorded: no host memory for the table)");
    else ca_track_name(e->site, where, sizeof where);
    fprintf(f, "cudalloc:   %" PRId64 " bytes (%.1f%%) in %" PRId64 " block%s from %s\n", e->bytes,
            p.live ? 100.0 * (double)e->bytes / (double)p.live : 0.0, e->count, e->count == 1 ? "" : "s", where);
  }
  if (shown < p.nsites) {
    int64_t rest = 0;
    for (size_t i = shown; i < p.nsites; i++) rest += p.sites[i].bytes;
    fprintf(f, "cudalloc:   %" PRId64 " bytes in %zu more call sites\n", rest, p.nsites - shown);
  }
}

typedef struct report_arg_s {
  FILE *f;
  size_t top;
} report_arg_t;

static void report_of(ca_device_t *d, void *arg) {
  const report_arg_t *r = arg;
  print_peak(r->f, d, CA_PEAK_ALLOCATED, r->top);
  print_peak(r->f, d, CA_PEAK_RESERVED, r->top);
}

void ca_peak_report(FILE *f, size_t top) {
  report_arg_t r = {f, top};
  ca_each_device(report_of, &r);
}

void ca_peak_write_files(void) {
  if (!ca_config.report[0]) return;
  char path[CA_CONFIG_PATH_MAX + 32];
  if (!ca_config_expand_path(ca_config.report, "-peak.txt", path, sizeof path)) {
    ca_log("report path '%s-peak.txt' is too long; report not written", ca_config.report);
    return;
  }
  FILE *f = fopen(path, "w");
  if (!f) {
    ca_log("cannot write report %s", path);
    return;
  }
  ca_peak_report(f, 0);
  ca_creep_report(f);
  if (fclose(f)) ca_log("could not finish report %s", path);
}
