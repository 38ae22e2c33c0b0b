/* The recorded run's memory, replayed from its events without a device.
 * Live blocks by address (a sorted array would do; a linear table is kept
 * small by the exports' sizes: a few thousand live blocks at most in a
 * step), pending bytes as ranges that completions and stream reuse cut. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GROW(arr, n, cap)                                                   \
  ((n) < (cap) || ((cap) = (cap) ? (cap) * 2 : 64,                          \
                   (arr) = realloc((arr), (cap) * sizeof *(arr))) != NULL)

void model_init(model_t *m) { memset(m, 0, sizeof *m); }

static void peak(int64_t v, int64_t *p) {
  if (v > *p) *p = v;
}

static size_t find_live(const model_device_t *d, uint64_t addr) {
  for (size_t i = d->nlive; i-- > 0;)
    if (d->live[i].addr == addr) return i;
  return (size_t)-1;
}

/* Cuts [lo, hi) out of every pending range; entries left with nothing
 * waiting are done. */
static void cut_pending(model_device_t *d, int dev, uint64_t lo, uint64_t hi, bool reuse,
                        const ca_trace_event_t *ev, model_done_fn done, void *arg) {
  for (size_t i = 0; i < d->nwaits;) {
    model_range_t r = d->waits[i].r;
    size_t e = d->waits[i].entry;
    uint64_t a = r.lo > lo ? r.lo : lo, b = r.hi < hi ? r.hi : hi;
    if (a >= b) {
      i++;
      continue;
    }
    d->waits[i] = d->waits[--d->nwaits];   /* replaced by what of it is left */
    if (r.lo < a && GROW(d->waits, d->nwaits, d->waits_cap)) d->waits[d->nwaits++] = (typeof(d->waits[0])){{r.lo, a}, e};
    if (b < r.hi && GROW(d->waits, d->nwaits, d->waits_cap)) d->waits[d->nwaits++] = (typeof(d->waits[0])){{b, r.hi}, e};
    model_pending_t *p = &d->pend[e];
    p->waiting -= b - a;
    d->pending -= (int64_t)(b - a);
    if (!p->done && (reuse || !p->waiting)) {
      p->done = true;
      if (done) done(&p->b, dev, ev, arg);
    }
  }
}

static bool add_pending(model_device_t *d, const model_block_t *b) {
  if (!GROW(d->pend, d->npend, d->pend_cap) || !GROW(d->waits, d->nwaits, d->waits_cap)) return false;
  d->pend[d->npend] = (model_pending_t){*b, b->span, false};
  d->waits[d->nwaits++] = (typeof(d->waits[0])){{b->addr, b->addr + b->span}, d->npend++};
  d->pending += (int64_t)b->span;
  peak(d->pending, &d->peak_pending);
  return true;
}

static bool map_range(model_device_t *d, uint64_t lo, uint64_t hi) {
  if (!d->classic)   /* pages: joined to the ranges they touch */
    for (size_t i = 0; i < d->nmapped; i++) {
      model_range_t *r = &d->mapped_ranges[i];
      if (r->hi == lo || r->lo == hi) {
        lo = r->lo < lo ? r->lo : lo;
        hi = r->hi > hi ? r->hi : hi;
        d->mapped_ranges[i--] = d->mapped_ranges[--d->nmapped];
      }
    }
  if (!GROW(d->mapped_ranges, d->nmapped, d->mapped_cap)) return false;
  d->mapped_ranges[d->nmapped++] = (model_range_t){lo, hi};
  return true;
}

static bool unmap_range(model_device_t *d, uint64_t lo, uint64_t hi) {
  for (size_t i = 0; i < d->nmapped; i++) {
    model_range_t r = d->mapped_ranges[i];
    if (lo < r.lo || hi > r.hi) continue;
    d->mapped_ranges[i] = d->mapped_ranges[--d->nmapped];
    if (r.lo < lo && !map_range(d, r.lo, lo)) return false;
    if (hi < r.hi && !map_range(d, hi, r.hi)) return false;
    return true;
  }
  return false;
}

static bool bad(char *err, size_t cap, const ca_trace_event_t *ev, const char *what) {
  snprintf(err, cap, "t=%llu ns, device %d: %s %s of %#llx (%llu bytes)", (unsigned long long)ev->time_ns,
           ev->device, what, ca_trace_kind_name(ev->kind), (unsigned long long)ev->addr,
           (unsigned long long)ev->size);
  return false;
}

bool model_apply(model_t *m, const ca_trace_event_t *ev, model_done_fn done, void *arg, char *err, size_t cap) {
  if (ev->device < 0 || ev->device >= MODEL_MAX_DEVICES) return bad(err, cap, ev, "a device out of range in");
  model_device_t *d = &m->dev[ev->device];
  if (ev->device >= m->ndevices) m->ndevices = ev->device + 1;
  model_block_t b = {ev->addr, ev->size + ev->extra, ev->size, ev->stream, ev->site};
  size_t i;
  switch (ev->kind) {
  case CA_EV_ALLOC:
    cut_pending(d, ev->device, b.addr, b.addr + b.span, true, ev, done, arg);   /* reused by its stream */
    if (!GROW(d->live, d->nlive, d->live_cap)) return bad(err, cap, ev, "out of memory at");
    d->live[d->nlive++] = b;
    d->allocated += (int64_t)b.span;
    d->allocs++;
    peak(d->allocated, &d->peak_allocated);
    break;
  case CA_EV_FREE:
  case CA_EV_FREE_ASYNC:
    if ((i = find_live(d, ev->addr)) == (size_t)-1) return bad(err, cap, ev, "a free of no live block:");
    b.site = d->live[i].site;
    d->live[i] = d->live[--d->nlive];
    d->allocated -= (int64_t)b.span;
    d->frees++;
    if (!add_pending(d, &b)) return bad(err, cap, ev, "out of memory at");
    break;
  case CA_EV_FREE_COMPLETED: cut_pending(d, ev->device, ev->addr, ev->addr + ev->size, false, ev, done, arg); break;
  case CA_EV_SEGMENT_MAP:
    d->mapped += (int64_t)ev->size;
    if (!map_range(d, ev->addr, ev->addr + ev->size)) return bad(err, cap, ev, "out of memory at");
    break;
  case CA_EV_SEGMENT_UNMAP:
    d->mapped -= (int64_t)ev->size;
    if (!unmap_range(d, ev->addr, ev->addr + ev->size)) return bad(err, cap, ev, "an unmap of memory not mapped:");
    break;
  case CA_EV_RESERVE:
    if (ev->addr) d->classic = true;   /* a whole segment's handle (pages have no address) */
    d->reserved += (int64_t)ev->size;
    peak(d->reserved, &d->peak_reserved);
    break;
  case CA_EV_RELEASE: d->reserved -= (int64_t)ev->size; break;
  case CA_EV_OOM: d->ooms++; break;
  case CA_EV_STEP: d->steps++; break;
  default: break;
  }
  return true;
}

void model_free(model_t *m) {
  for (int i = 0; i < MODEL_MAX_DEVICES; i++) {
    free(m->dev[i].live);
    free(m->dev[i].pend);
    free(m->dev[i].waits);
    free(m->dev[i].mapped_ranges);
  }
  memset(m, 0, sizeof *m);
}
