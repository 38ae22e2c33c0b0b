/* cudalloc_check(): walks every pool of a device and verifies the
 * invariants the rest of the core relies on. Each broken invariant has its
 * own code (check.h) and one line on stderr. */
#include "check.h"

#include "bins.h"
#include "log.h"
#include "pages.h"
#include "ptrmap.h"
#include "qtable.h"
#include "segments.h"
#include "sitelive.h"
#include "tcache.h"

typedef struct tally_s {
  int64_t live_bytes, requested, live_count, pending_bytes, mapped_bytes;
  size_t free_count[CA_POOL_COUNT], free_bytes[CA_POOL_COUNT], hole_count[CA_POOL_COUNT];
} tally_t;

#define FAIL(code, ...)       \
  do {                        \
    ca_log(__VA_ARGS__);      \
    return code;              \
  } while (0)

static ca_check_code_t check_pages(ca_device_t *d, const ca_segment_t *seg, const ca_block_t *b) {
  if (seg->classic) return CA_CHECK_OK;
  size_t first = (b->addr - seg->base) / d->page, last = (b->addr + b->size - 1 - seg->base) / d->page;
  bool hole = b->state == CA_FREE && b->kind == CA_HOLE;
  if (hole && ((b->addr - seg->base) % d->page || b->size % d->page))
    FAIL(CA_CHECK_HOLE, "check: hole [%#lx, +%zu) is not page-aligned", (unsigned long)b->addr, b->size);
  for (size_t i = first; i <= last; i++) {
    if (hole && ca_page_mapped(seg, i))
      FAIL(CA_CHECK_HOLE, "check: hole [%#lx, +%zu) has page %zu mapped", (unsigned long)b->addr, b->size, i);
    if (!hole && !ca_page_mapped(seg, i))
      FAIL(CA_CHECK_UNMAPPED_LIVE, "check: block [%#lx, +%zu) (state %d) touches unmapped page %zu",
           (unsigned long)b->addr, b->size, b->state, i);
  }
  return CA_CHECK_OK;
}

static ca_check_code_t check_block(ca_device_t *d, const ca_segment_t *seg, const ca_block_t *b, tally_t *t) {
  int pool = seg->pool->id;
  if (!b->size || b->size % CA_MIN_BLOCK)
    FAIL(CA_CHECK_SIZE, "check: block %#lx has size %zu", (unsigned long)b->addr, b->size);
  if (b->seg != seg) FAIL(CA_CHECK_TILING, "check: block %#lx names another segment", (unsigned long)b->addr);
  const ca_block_t *n = b->next;
  if (n && b->state == CA_FREE && n->state == CA_FREE && b->kind == n->kind && b->in_bins && n->in_bins)
    FAIL(CA_CHECK_UNCOALESCED, "check: free blocks %#lx and %#lx are neighbours", (unsigned long)b->addr,
         (unsigned long)n->addr);
  switch (b->state) {
  case CA_FREE:
    if (!b->in_bins) FAIL(CA_CHECK_BINS, "check: free block %#lx is not in the bins", (unsigned long)b->addr);
    if (!ca_bins_files(b->kind == CA_HOLE ? &seg->pool->holes : &seg->pool->bins, b))
      FAIL(CA_CHECK_BINS, "check: free block %#lx (%zu bytes) is not in its size's bin, under its bound",
           (unsigned long)b->addr, b->size);
    if (b->kind == CA_HOLE) t->hole_count[pool]++;
    else t->free_count[pool]++, t->free_bytes[pool] += b->size;
    break;
  case CA_LIVE:
    if (ca_ptrmap_get(&d->live, b->addr) != b)
      FAIL(CA_CHECK_LIVE_MAP, "check: live block %#lx is missing from the pointer map", (unsigned long)b->addr);
    if (b->in_bins) FAIL(CA_CHECK_BINS, "check: live block %#lx is in the bins", (unsigned long)b->addr);
    if (b->requested > b->size)   /* a hand-out (a front-cache hit too) gave a block smaller than its request */
      FAIL(CA_CHECK_SIZE, "check: live block %#lx of %zu bytes serves a request of %zu", (unsigned long)b->addr,
           b->size, b->requested);
    t->live_bytes += (int64_t)b->size;
    t->requested += (int64_t)b->requested;
    t->live_count++;
    break;
  case CA_PENDING: {
    const ca_queue_t *q = b->queue;
    bool want_bins = q && q->stream && !q->dead;
    if (!q || !b->fence) FAIL(CA_CHECK_QUEUE, "check: pending block %#lx has no queue", (unsigned long)b->addr);
    if ((bool)b->in_bins != want_bins)
      FAIL(CA_CHECK_QUEUE, "check: pending block %#lx is %sin its queue's bins", (unsigned long)b->addr,
           b->in_bins ? "" : "not ");
    if (b->in_bins && (!q->bins[pool] || !ca_bins_files(q->bins[pool], b)))
      FAIL(CA_CHECK_BINS, "check: pending block %#lx (%zu bytes) is not in its size's bin, under its bound",
           (unsigned long)b->addr, b->size);
    t->pending_bytes += (int64_t)b->size;
    break;
  }
  default:
    FAIL(CA_CHECK_TILING, "check: block %#lx has state %d", (unsigned long)b->addr, b->state);
  }
  return check_pages(d, seg, b);
}

static ca_check_code_t check_segment(ca_device_t *d, const ca_segment_t *seg, tally_t *t) {
  uintptr_t at = seg->base;
  const ca_block_t *prev = NULL;
  for (const ca_block_t *b = seg->first; b; prev = b, b = b->next) {
    if (b->addr != at || b->prev != prev)
      FAIL(CA_CHECK_TILING, "check: segment %#lx: block at %#lx, expected %#lx", (unsigned long)seg->base,
           (unsigned long)b->addr, (unsigned long)at);
    ca_check_code_t rc = check_block(d, seg, b, t);
    if (rc) return rc;
    at += b->size;
  }
  if (at != seg->base + seg->size)
    FAIL(CA_CHECK_TILING, "check: segment %#lx ends at %#lx, blocks end at %#lx", (unsigned long)seg->base,
         (unsigned long)(seg->base + seg->size), (unsigned long)at);
  t->mapped_bytes += seg->classic ? (int64_t)seg->size : (int64_t)(seg->mapped_pages * d->page);
  return CA_CHECK_OK;
}

/* Every block filed under a fence is pending there, and in nothing else. */
static ca_check_code_t check_queue(const ca_queue_t *q, int64_t *pending) {
  const ca_fence_t *open = &q->open;
  for (const ca_fence_t *f = open; f; f = (f == open) ? q->head : f->next) {
    for (const ca_block_t *b = f->blocks; b; b = b->fence_next) {
      if (b->state != CA_PENDING || b->queue != q || b->fence != f)
        FAIL(CA_CHECK_QUEUE, "check: block %#lx is listed in a fence it does not wait for", (unsigned long)b->addr);
      *pending -= (int64_t)b->size;
    }
  }
  return CA_CHECK_OK;
}

static ca_check_code_t check_queues(ca_device_t *d, const tally_t *t) {
  int64_t pending = t->pending_bytes;
  ca_check_code_t rc = check_queue(&d->epoch, &pending);
  if (!rc) rc = check_queue(&d->held, &pending);
  for (const ca_queue_t *q = ca_qlist_first(d, CA_QL_ALL); q && !rc; q = ca_qlist_next(q, CA_QL_ALL))
    rc = check_queue(q, &pending);
  if (!rc && pending)
    FAIL(CA_CHECK_QUEUE, "check: %lld pending bytes are in no fence", (long long)pending);
  return rc;
}

static ca_check_code_t check_stats(ca_device_t *d, const tally_t *t) {
  const cudalloc_stats_t *s = &d->stats;
  for (int p = 0; p < CA_POOL_COUNT; p++) {
    const ca_pool_t *pool = &d->pools[p];
    if (pool->bins.count != t->free_count[p] || pool->bins.bytes != t->free_bytes[p] ||
        pool->holes.count != t->hole_count[p])
      FAIL(CA_CHECK_BINS, "check: pool %d bins hold %zu blocks, %zu are free", p, pool->bins.count, t->free_count[p]);
  }
  int64_t cache = (int64_t)(d->page_cache_count * d->page), left_reserved, left_mapped;
  ca_classic_leftover_bytes(d, &left_reserved, &left_mapped);
  if (s->allocated_bytes.current != t->live_bytes || s->requested_bytes.current != t->requested ||
      s->num_live_blocks.current != t->live_count || (int64_t)d->live.count != t->live_count)
    FAIL(CA_CHECK_STATS, "check: stats say %lld bytes (%lld requested) in %lld live blocks, blocks hold %lld (%lld) in %lld (%zu mapped)",
         (long long)s->allocated_bytes.current, (long long)s->requested_bytes.current, (long long)s->num_live_blocks.current, (long long)t->live_bytes,
         (long long)t->requested, (long long)t->live_count, d->live.count);
  int64_t by_site = ca_sitelive_total(ca_sitelive_of(d));
  if (by_site != s->allocated_bytes.current)
    FAIL(CA_CHECK_STATS, "check: call sites hold %lld live bytes, stats say %lld", (long long)by_site,
         (long long)s->allocated_bytes.current);
  if (s->active_bytes.current != t->live_bytes + t->pending_bytes)
    FAIL(CA_CHECK_STATS, "check: active bytes %lld, live + pending %lld", (long long)s->active_bytes.current,
         (long long)(t->live_bytes + t->pending_bytes));
  /* Leftovers: what the driver did not take back yet is still counted. */
  int64_t mapped = t->mapped_bytes + left_mapped, reserved = t->mapped_bytes + cache + left_reserved;
  if (s->mapped_bytes.current != mapped || s->reserved_bytes.current != reserved)
    FAIL(CA_CHECK_STATS, "check: mapped %lld (pages say %lld), reserved %lld (mapped + cache + leftovers %lld)",
         (long long)s->mapped_bytes.current, (long long)mapped, (long long)s->reserved_bytes.current,
         (long long)reserved);
  return CA_CHECK_OK;
}

/* Every page of every chunk is mapped or in the page cache: the chunks'
 * pages add up to the mapped pages and the cache, their cached counts to
 * the cache, and every cached page names a piece its chunk has. */
static ca_check_code_t check_chunks(const ca_device_t *d) {
  size_t pages = 0, cached = 0, mapped = 0;
  for (const ca_chunk_t *c = d->chunks; c; c = c->next) {
    if (c->cached > c->pages) FAIL(CA_CHECK_CHUNKS, "check: a chunk of %zu pages has %zu cached", c->pages, c->cached);
    pages += c->pages;
    cached += c->cached;
  }
  for (size_t i = 0; i < d->page_cache_count; i++)
    if (d->page_cache[i].index >= d->page_cache[i].chunk->pages)
      FAIL(CA_CHECK_CHUNKS, "check: cached page %zu of a chunk of %zu pages", d->page_cache[i].index,
           d->page_cache[i].chunk->pages);
  for (int p = 0; p < CA_POOL_COUNT; p++)
    for (const ca_segment_t *seg = d->pools[p].segments; seg; seg = seg->next)
      if (!seg->classic) mapped += seg->mapped_pages;
  if (cached != d->page_cache_count || pages != mapped + cached)
    FAIL(CA_CHECK_CHUNKS, "check: chunks hold %zu pages (%zu cached), segments map %zu and the cache has %zu", pages,
         cached, mapped, d->page_cache_count);
  return CA_CHECK_OK;
}

static ca_check_code_t check_segments(ca_device_t *d, tally_t *t) {
  for (int p = 0; p < CA_POOL_COUNT; p++)
    for (const ca_segment_t *seg = d->pools[p].segments; seg; seg = seg->next) {
      if (seg->pool != &d->pools[p]) FAIL(CA_CHECK_TILING, "check: segment %#lx in the wrong pool", (unsigned long)seg->base);
      ca_check_code_t rc = check_segment(d, seg, t);
      if (rc) return rc;
    }
  return CA_CHECK_OK;
}

/* Blocks in the threads' front caches are LIVE here, as the core sees them;
 * the caches are held still while the live blocks' sizes are read. */
ca_check_code_t ca_check_device(ca_device_t *d) {
  tally_t t = {0};
  ca_tcache_quiesce();
  ca_check_code_t rc = check_segments(d, &t);
  t.requested -= ca_tcache_drift(d);   /* compared with the core's count */
  ca_tcache_resume();
  if (!rc) rc = check_queues(d, &t);
  if (!rc) rc = check_stats(d, &t);
  return rc ? rc : check_chunks(d);
}
