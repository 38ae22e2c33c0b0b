/* Finding a block for a request, and growing a pool (freed blocks return
 * through blocks.c).
 *
 * A request on stream S may take a free block (the pool's bins) or a block
 * S itself freed that is still pending (S's queue bins: work on S is
 * ordered, so S may reuse it at once). The tighter fit wins. A request that
 * is not stream-ordered (stream NULL) takes free blocks only. */
#include "pool.h"

#include "bins.h"
#include "blocks.h"
#include "fence.h"
#include "pages.h"
#include "segments.h"

/* Classic segments: blocks above max_split_size are neither split nor
 * handed to smaller requests; oversize requests accept a little slack. */
static size_t max_fit(size_t rounded) {
  uint64_t ms = ca_config.max_split_size;
  if (ca_config.expandable_segments || ms == UINT64_MAX) return SIZE_MAX;
  return rounded < ms ? (size_t)ms : rounded + CA_OVERSIZE_SLACK;
}

static bool should_split(const ca_pool_t *pool, const ca_block_t *b, size_t rounded) {
  size_t rest = b->size - rounded;
  if (rest < CA_MIN_BLOCK) return false;
  if (ca_config.expandable_segments || pool->id == CA_POOL_SMALL) return true;
  return rest > CA_SMALL_REQUEST && b->size <= ca_config.max_split_size;
}

/* The block for the request, cut from the front of b when b is larger:
 * the rest keeps b's struct and the lists b is on (its pool's bins, or
 * its queue's bins and fence: the same fence, so no part is released
 * early), and moves in its bins only when its size crosses a bin; in its
 * fence it goes to the front, where a rest filed anew would go (the order
 * a fence releases its blocks in decides how they coalesce). Otherwise b
 * leaves those lists whole. */
static ca_block_t *cut(ca_device_t *d, ca_pool_t *pool, ca_block_t *b, size_t rounded, bool pending) {
  ca_bins_t *bins = pending ? b->queue->bins[pool->id] : &pool->bins;
  size_t old = b->size;
  ca_block_t *head = should_split(pool, b, rounded) ? ca_block_split_front(d, b, rounded) : NULL;
  if (head) {   /* else no host memory for a struct: b goes whole */
    if (pending) ca_queue_refile(b);
    ca_bins_resized(bins, b, old);
    return head;
  }
  if (pending) ca_queue_remove(d, b);
  else ca_bins_remove(bins, b);
  return b;
}

/* The stream's own pending block wins a tie, so the pool is searched only
 * for a strictly tighter fit (at most mine's size less one unit): with a
 * fit of its own the search usually ends at its first bit scan. A pool
 * whose largest bin's bound is below the request is not searched at all
 * (on the one-stream GPU-like pairs, 9 searches in 10). */
ca_block_t *ca_pool_take(ca_device_t *d, ca_pool_t *pool, size_t rounded, ca_stream_t stream) {
  size_t max = max_fit(rounded);
  ca_queue_t *q = stream ? ca_queue_find(d, stream, false) : NULL;
  uint64_t owner = q ? q->owner : ca_stream_owner(ca_stream_normal(stream));   /* the stream's queue's by its making */
  ca_bins_t *qbins = q ? q->bins[pool->id] : NULL;
  ca_block_t *mine = !qbins ? NULL : max == SIZE_MAX ? ca_bins_find_any(qbins, rounded) : ca_bins_find(qbins, rounded, max);
  if (CA_DEBUG(reuse_pending_anywhere) && !mine) mine = ca_queue_find_any(d, pool, rounded, max, &q);
  size_t tighter = mine ? mine->size - CA_MIN_BLOCK : max;
  bool search = !(mine && mine->size == rounded) &&
                (CA_DEBUG(pool_search_always) || ca_bins_may_hold(&pool->bins, rounded));
  ca_block_t *any = search ? ca_bins_find(&pool->bins, rounded, tighter) : NULL;
  ca_block_t *b = any ? any : mine;
  if (!b) return NULL;
  bool pending = b == mine;
  b = cut(d, pool, b, rounded, pending);
  if (!pending) ca_stat_add(&d->stats.active_bytes, (int64_t)b->size); /* pending blocks were active already */
  b->state = CA_LIVE;
  b->queue = NULL;
  b->fence = NULL;
  b->stream = stream ? stream : CA_STREAM_LEGACY;   /* free_mode:stream's cudaFree fences that */
  b->owner = owner;
  return b;
}

// ----------------------------------------------------------------------------
// Growing
// ----------------------------------------------------------------------------

/* The placement that maps the fewest pages: a hole, extended downwards
 * into the free mapped block before it and, if the hole is too short,
 * upwards into the free mapped block after it. */
typedef struct placement_s {
  size_t need_bytes;
  ca_block_t *hole, *before, *after;
  size_t pages;
} placement_t;

static ca_block_t *free_mapped(ca_block_t *b) {
  return b && b->state == CA_FREE && b->kind == CA_MAPPED && b->in_bins ? b : NULL;
}

static bool consider_hole(ca_block_t *h, void *arg) {
  placement_t *pl = arg;
  size_t page = h->seg->pool->dev->page;
  ca_block_t *before = free_mapped(h->prev), *after = NULL;
  size_t have = before ? before->size : 0;
  size_t need = pl->need_bytes > have ? pl->need_bytes - have : 0;
  size_t pages = (need + page - 1) / page;
  if (pages * page > h->size) {
    after = free_mapped(h->next);
    if (!after || have + h->size + after->size < pl->need_bytes) return true;
    pages = h->size / page;
  }
  if (!pages) return true;
  if (!pl->hole || pages < pl->pages || (pages == pl->pages && h->size < pl->hole->size)) {
    pl->hole = h;
    pl->before = before;
    pl->after = after;
    pl->pages = pages;
  }
  return true;
}

static CUresult grow_expandable(ca_device_t *d, ca_pool_t *pool, size_t rounded) {
  placement_t pl = {.need_bytes = rounded};
  ca_bins_each(&pool->holes, consider_hole, &pl);
  if (!pl.hole) return CUDA_ERROR_OUT_OF_MEMORY;   /* the address range is full */
  if (!ca_block_reserve(d, 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  /* Out of the bins, the three blocks are safe from page stealing. */
  ca_block_t *h = pl.hole;
  ca_bins_remove(&pool->holes, h);
  if (pl.before) ca_bins_remove(&pool->bins, pl.before);
  if (pl.after) ca_bins_remove(&pool->bins, pl.after);
  size_t mapped;
  CUresult rc = ca_map_range(d, h->seg, h->addr, pl.pages * d->page, &mapped);
  if (pl.before) ca_bins_insert(&pool->bins, pl.before);
  if (pl.after) ca_bins_insert(&pool->bins, pl.after);
  if (mapped && mapped < h->size) ca_block_coalesce_free(d, ca_block_split(d, h, mapped));
  if (mapped) h->kind = CA_MAPPED;
  ca_block_coalesce_free(d, h);
  return rc;
}

size_t ca_pool_growth_bytes(const ca_device_t *d, size_t rounded) {
  size_t bytes = ca_config.expandable_segments ? rounded : ca_classic_segment_size(rounded);
  return bytes > SIZE_MAX - d->page ? bytes : (bytes + d->page - 1) / d->page * d->page;
}

CUresult ca_pool_grow(ca_device_t *d, ca_pool_t *pool, size_t rounded) {
  if (ca_config.expandable_segments) return grow_expandable(d, pool, rounded);
  return ca_classic_grow(d, pool, rounded);
}
