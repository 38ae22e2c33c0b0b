/* "sitelive.c": live bytes per call site, per device, kept up to date by
 * every allocation and free (one hash lookup each), so that the peak and
 * creep reports read them without walking the live blocks. */
#ifndef CUDALLOC_SITELIVE_H
#define CUDALLOC_SITELIVE_H

#include "types.h"

/* What one call site holds. An entry stays when its bytes fall to zero:
 * sites are few (interned stacks, or return addresses) and come back. */
typedef struct ca_site_live_s {
  void *site;                   /* block->site (NULL with track:off) */
  int64_t bytes;                /* rounded bytes, as allocated_bytes counts them */
  int64_t requested;            /* what the program asked for */
  int64_t count;                /* live blocks */
  int series;                   /* creep.c: the site's column; -1 none yet, -2 none to be had */
  bool used;
  bool lost;                    /* the entry of blocks whose site found no room (no host memory) */
} ca_site_live_t;

typedef struct ca_sitelive_s {
  ca_site_live_t *slots;
  size_t cap, used;
  ca_site_live_t *last;         /* the entry found last: a site allocates and frees in runs */
  ca_site_live_t lost;          /* blocks whose site found no room (no host memory) */
} ca_sitelive_t;

extern ca_sitelive_t ca_sitelive_tables[CA_MAX_SLOTS];
/* The table of device d (the caller holds d's lock). */
static inline ca_sitelive_t *ca_sitelive_of(const ca_device_t *d) { return &ca_sitelive_tables[d->slot]; }
void ca_sitelive_add_slow(ca_sitelive_t *t, ca_block_t *b, int sign);
/* b became live (sign +1: its site counts b->requested, remembered in
 * b->site_requested) or stopped being live (sign -1: the site gives back
 * what it counted, whatever hits of the front cache made of requested
 * since). Every allocation and free comes here: the memo of the last entry
 * found (a site allocates and frees in runs) answers inline. */
static inline void ca_sitelive_add(ca_sitelive_t *t, ca_block_t *b, int sign) {
  ca_site_live_t *e = t->last;
  if (!e || e->site != b->site || CA_DEBUG(sitelive_memo_any_site) || (sign < 0 && e->count == 0)) {
    ca_sitelive_add_slow(t, b, sign);
    return;
  }
  if (sign > 0) b->site_requested = b->requested;
  e->bytes += sign > 0 ? (int64_t)b->size : -(int64_t)b->size;
  e->requested += sign > 0 ? (int64_t)b->site_requested : -(int64_t)b->site_requested;
  e->count += sign > 0 ? 1 : -1;
}
/* Copies the entries holding bytes into out, which has room for
 * t->used + 1 (every entry and the lost one); returns their count. */
size_t ca_sitelive_copy(const ca_sitelive_t *t, ca_site_live_t *out);
/* Sorts n copied entries, biggest first. */
void ca_sitelive_sort(ca_site_live_t *e, size_t n);
/* The total the table says d holds, to compare with allocated_bytes. */
int64_t ca_sitelive_total(const ca_sitelive_t *t);
/* Live bytes forgotten (device reset): every entry to zero. */
void ca_sitelive_clear(ca_sitelive_t *t);
/* Frees every table (shutdown); abandon: forgets them unfreed (fork child). */
void ca_sitelive_forget(bool abandon);

#endif /* CUDALLOC_SITELIVE_H */
