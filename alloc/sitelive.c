/* Live bytes per call site (see sitelive.h): open addressing keyed by the
 * site pointer, entries never removed. */
#include "sitelive.h"

#include <stdlib.h>
#include <string.h>

ca_sitelive_t ca_sitelive_tables[CA_MAX_SLOTS];
/* A fork child's view of its parent's tables: kept reachable, never used. */
static ca_site_live_t *volatile abandoned[CA_MAX_SLOTS];

static size_t slot_of(const void *site, size_t cap) {
  uint64_t h = (uint64_t)(uintptr_t)site * 0x9E3779B97F4A7C15ull;
  return (size_t)(h >> 32) & (cap - 1);
}

static ca_site_live_t *probe(ca_site_live_t *slots, size_t cap, const void *site) {
  size_t i = slot_of(site, cap);
  while (slots[i].used && slots[i].site != site) i = (i + 1) & (cap - 1);
  return &slots[i];
}

static bool grow(ca_sitelive_t *t) {
  size_t cap = t->cap ? t->cap * 2 : 64;
  ca_site_live_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return false;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].used) *probe(slots, cap, t->slots[i].site) = t->slots[i];
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  t->last = NULL;   /* it pointed into the old slots */
  return true;
}

/* The entry of site, made when missing; the lost entry when no room.
 */
static ca_site_live_t *lookup(ca_sitelive_t *t, void *site) {
  ca_site_live_t *e;
  if (t->cap) {
    e = probe(t->slots, t->cap, site);
    if (e->used) return t->last = e;
  }
  if ((t->used + 1) * 2 > t->cap && !grow(t)) return &t->lost;
  e = probe(t->slots, t->cap, site);
  *e = (ca_site_live_t){.site = site, .series = -1, .used = true};
  t->used++;
  return t->last = e;
}

/* The inline memo's miss (sitelive.h), or a free its site's entry never
 * counted. */
void ca_sitelive_add_slow(ca_sitelive_t *t, ca_block_t *b, int sign) {
  ca_site_live_t *e = t->last;
  if (!e || !(e->site == b->site || CA_DEBUG(sitelive_memo_any_site))) e = lookup(t, b->site);
  if (sign > 0) {
    e->bytes += (int64_t)b->size;
    b->site_requested = b->requested;
    e->requested += (int64_t)b->site_requested;
    e->count++;
    return;
  }
  if (e->count == 0 && e != &t->lost) e = &t->lost;   /* counted there when it arrived */
  e->bytes -= (int64_t)b->size;
  e->requested -= (int64_t)b->site_requested;
  e->count--;
}

static int by_bytes(const void *a, const void *b) {
  int64_t x = ((const ca_site_live_t *)a)->bytes, y = ((const ca_site_live_t *)b)->bytes;
  return x > y ? -1 : x < y;
}

size_t ca_sitelive_copy(const ca_sitelive_t *t, ca_site_live_t *out) {
  size_t n = 0;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].used && t->slots[i].count > 0) out[n++] = t->slots[i];
  if (t->lost.count > 0) {
    out[n] = t->lost;
    out[n++].lost = true;
  }
  return n;
}

void ca_sitelive_sort(ca_site_live_t *e, size_t n) { qsort(e, n, sizeof *e, by_bytes); }

int64_t ca_sitelive_total(const ca_sitelive_t *t) {
  int64_t sum = t->lost.bytes;
  for (size_t i = 0; i < t->cap; i++) sum += t->slots[i].bytes;
  return sum;
}

void ca_sitelive_clear(ca_sitelive_t *t) {
  for (size_t i = 0; i < t->cap; i++) t->slots[i].bytes = t->slots[i].requested = t->slots[i].count = 0;
  t->lost.bytes = t->lost.requested = t->lost.count = 0;
}

void ca_sitelive_forget(bool abandon) {
  for (int i = 0; i < CA_MAX_SLOTS; i++) {
    if (abandon) abandoned[i] = ca_sitelive_tables[i].slots;
    else free(ca_sitelive_tables[i].slots);
    memset(&ca_sitelive_tables[i], 0, sizeof ca_sitelive_tables[i]);
  }
}
