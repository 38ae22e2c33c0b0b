/* Physical pages of expandable segments.
 *
 * Physical memory comes in chunks (types.h): one handle created for a whole
 * run of pages, sized to what the allocation needs, so that a 1 GiB block
 * costs one create, not 512. Each page of a chunk is mapped on its own, so
 * that it can be unmapped from a free hole and mapped again wherever memory
 * is needed, without creating anything: creating a handle costs ~100 times
 * a map. Unmapped pages wait in the device's page cache. Access is granted
 * once per contiguous run.
 *
 * Growth creates new pages while memory is not short, and moves pages out
 * of free holes first only when it is (the device's limit is near, or
 * reserved memory would pass active memory by more than CA_PAGE_SLACK):
 * so the allocation path unmaps nothing while there is room, and reserved
 * memory stays within a few percent of what blocks hold. A page that
 * growths keep moving out and back stays where it is (churn.c), so that a
 * repeated sequence settles. */
#include "pages.h"

#include <stdlib.h>

#include "arena.h"
#include "bins.h"
#include "blocks.h"
#include "churn.h"
#include "log.h"
#include "peers.h"
#include "segments.h"
#include "trace.h"

static size_t page_index(const ca_segment_t *seg, uintptr_t addr) {
  return (addr - seg->base) / seg->pool->dev->page;
}

bool ca_page_mapped(const ca_segment_t *seg, size_t i) {
  return seg->mapped[i / 64] >> (i % 64) & 1;
}

void ca_whole_pages(const ca_block_t *b, size_t page, uintptr_t *lo, uintptr_t *hi) {
  *lo = (b->addr + page - 1) & ~(uintptr_t)(page - 1);
  *hi = (b->addr + b->size) & ~(uintptr_t)(page - 1);
}

static void set_mapped(ca_segment_t *seg, size_t i, bool on) {
  if (on) seg->mapped[i / 64] |= 1ull << (i % 64);
  else seg->mapped[i / 64] &= ~(1ull << (i % 64));
  seg->mapped_pages += on ? 1 : (size_t)-1;
}

static void cache_put(ca_device_t *d, ca_page_t pg) {
  d->page_cache[d->page_cache_count++] = pg;
  pg.chunk->cached++;
}

static ca_page_t cache_take(ca_device_t *d) {
  ca_page_t pg = d->page_cache[--d->page_cache_count];
  pg.chunk->cached--;
  return pg;
}

CUresult ca_region_init(ca_segment_t *seg, ca_pool_t *pool, uintptr_t base, size_t size) {
  ca_device_t *d = pool->dev;
  seg->pool = pool;
  seg->base = base;
  seg->size = size;
  seg->npages = size / d->page;
  seg->pages = calloc(seg->npages, sizeof *seg->pages);
  seg->mapped = calloc((seg->npages + 63) / 64, sizeof *seg->mapped);
  seg->churn = calloc(seg->npages, sizeof *seg->churn);
  ca_block_t *hole = ca_block_new(d);
  if (!seg->pages || !seg->mapped || !seg->churn || !hole) return CUDA_ERROR_OUT_OF_MEMORY;
  hole->addr = base;
  hole->size = size;
  hole->seg = seg;
  ca_block_set_free(hole, CA_HOLE);
  seg->first = hole;
  ca_bins_insert(&pool->holes, hole);
  return CUDA_SUCCESS;
}

/* Unmaps the mapped runs of pages [from, to) with one call per run. */
static CUresult unmap_runs(ca_device_t *d, ca_segment_t *seg, size_t from, size_t to) {
  CUresult worst = CUDA_SUCCESS;
  for (size_t i = from; i < to;) {
    if (!ca_page_mapped(seg, i)) { i++; continue; }
    size_t j = i;
    while (j < to && ca_page_mapped(seg, j)) j++;
    CUresult rc = CA_CALL(d, backend_unmap, ca_state.be->unmap(seg->base + i * d->page, (j - i) * d->page));
    if (rc) { worst = rc; i = j; continue; }
    for (size_t k = i; k < j; k++) {
      set_mapped(seg, k, false);
      cache_put(d, seg->pages[k]);
    }
    ca_stat_add(&d->stats.mapped_bytes, -(int64_t)((j - i) * d->page));
    ca_trace_mem(d, CA_EV_SEGMENT_UNMAP, seg->base + i * d->page, (j - i) * d->page);
    i = j;
  }
  return worst;
}

/* Releases every chunk whose pages are all in the page cache, and takes
 * its pages out of the cache. A chunk the driver will not release stays,
 * whole, for later. */
static void release_cache(ca_device_t *d) {
  bool any = false;
  for (ca_chunk_t **link = &d->chunks, *c; (c = *link);) {
    if (c->cached != c->pages || CA_CALL(d, backend_release, ca_state.be->release(c->handle))) {
      link = &c->next;
      continue;
    }
    ca_stat_add(&d->stats.reserved_bytes, -(int64_t)(c->pages * d->page));
    ca_arena_refund(d, c->pages * d->page);
    ca_trace_mem(d, CA_EV_RELEASE, 0, c->pages * d->page);
    c->pages = 0;   /* released: its cache entries go below */
    any = true;
    link = &c->next;
  }
  if (!any) return;
  size_t kept = 0;
  for (size_t i = 0; i < d->page_cache_count; i++)
    if (d->page_cache[i].chunk->pages) d->page_cache[kept++] = d->page_cache[i];
  d->page_cache_count = kept;
  for (ca_chunk_t **link = &d->chunks, *c; (c = *link);) {
    if (c->pages) {
      link = &c->next;
      continue;
    }
    *link = c->next;
    free(c);
  }
}

void ca_pages_teardown(ca_device_t *d, bool call_backend) {
  /* After the regions' teardown every page that could be unmapped is in
   * the cache; a chunk with a page the driver kept mapped is lost. */
  size_t lost = 0;
  for (ca_chunk_t *c = d->chunks, *next; c; c = next) {
    next = c->next;
    if (call_backend && (c->cached != c->pages ||
                         CA_CALL_TRYING(d, backend_release, ca_state.be->release(c->handle))))
      lost += c->pages;
    free(c);
  }
  if (lost) ca_log("device %d: the driver kept refusing to release %zu pages; they are lost", d->ordinal, lost);
  d->chunks = NULL;
  free(d->page_cache);
  d->page_cache = NULL;
  d->page_cache_count = d->page_cache_cap = 0;
}

void ca_region_teardown(ca_device_t *d, ca_segment_t *seg, bool call_backend) {
  /* Unmapped pages join the page cache, which the device then releases;
   * a page the driver keeps refusing to unmap is lost with its handle. */
  CUresult rc = CUDA_SUCCESS;
  for (int i = 0; call_backend && seg->mapped && seg->mapped_pages && i < CA_TEARDOWN_TRIES; i++)
    rc = unmap_runs(d, seg, 0, seg->npages);
  if (call_backend && seg->mapped_pages)
    ca_log("device %d: the driver kept refusing to unmap %zu pages (error %d); they are lost", d->ordinal,
           seg->mapped_pages, rc);
  ca_block_t *next;
  for (ca_block_t *b = seg->first; b; b = next) {
    next = b->next;
    free(b);
  }
  seg->first = NULL;
  free(seg->pages);
  free(seg->mapped);
  free(seg->churn);
  seg->pages = NULL;
  seg->mapped = NULL;
  seg->churn = NULL;
}

/* One new chunk of n pages, within the device's limit (charged for all
 * its arenas: arena.c), its pages cached (pushed last-first, so that a run
 * maps them in order). */
static CUresult create_chunk(ca_device_t *d, size_t n) {
  if (!ca_arena_charge(d, n * d->page)) return CUDA_ERROR_OUT_OF_MEMORY;
  ca_chunk_t *c = calloc(1, sizeof *c);
  CUresult rc = c ? CA_CALL(d, backend_create, ca_state.be->create(d->ordinal, n * d->page, &c->handle))
                  : CUDA_ERROR_OUT_OF_MEMORY;
  if (rc) {
    free(c);
    ca_arena_refund(d, n * d->page);
    return rc;
  }
  ca_stat_add(&d->stats.reserved_bytes, (int64_t)(n * d->page));
  ca_trace_mem(d, CA_EV_RESERVE, 0, n * d->page);
  c->pages = n;
  c->next = d->chunks;
  d->chunks = c;
  for (size_t i = n; i-- > 0;) cache_put(d, (ca_page_t){c, i});
  return CUDA_SUCCESS;
}

/* Short of memory: n more pages would pass the device's limit, or leave
 * reserved memory more than CA_PAGE_SLACK above the bytes that blocks hold
 * once these pages hold one too. */
static bool short_of_memory(const ca_device_t *d, size_t n) {
  size_t add = n * d->page, reserved = (size_t)d->stats.reserved_bytes.current + add;
  double held = (double)d->stats.allocated_bytes.current + (double)add;
  return ca_arena_reserved(d) + add > d->limit || (double)reserved > held * (1.0 + CA_PAGE_SLACK) + (double)d->page;
}

/* Pages to create when n are missing: n, rounded up towards
 * CA_CHUNK_PAGES while the extra pages stay within the slack over
 * allocated bytes and the device's limit. Small blocks grow their pool a
 * page at a time; a chunk of several serves the next growths with no
 * driver call, as PyTorch's 20 MiB pages do, at most CA_PAGE_SLACK more
 * reserved. */
static size_t chunk_pages(const ca_device_t *d, size_t n) {
  if (n >= CA_CHUNK_PAGES) return n;
  size_t spare = (size_t)((double)d->stats.allocated_bytes.current * CA_PAGE_SLACK) / d->page;
  size_t all = ca_arena_reserved(d);   /* every arena's: the limit is the ordinal's */
  size_t room = all < d->limit ? (d->limit - all) / d->page : 0;
  size_t want = n + spare < CA_CHUNK_PAGES ? n + spare : CA_CHUNK_PAGES;
  return want < room ? want : (n > room ? n : room);
}

/* Why pages move out of free blocks: a trim, or a growth, which spares
 * the pages that keep coming back (churn.c) unless memory is short for
 * real. */
typedef enum { STEAL_TRIM, STEAL_GROWTH, STEAL_GROWTH_ANY } steal_mode_t;
static size_t steal(ca_device_t *d, size_t want, steal_mode_t mode);

/* Pages moved out of free holes for pages at addr; any_page: even those
 * that keep coming back (churn.c), memory being short for real. */
static void move_pages(ca_device_t *d, size_t n, uintptr_t addr, bool any_page) {
  size_t moved = steal(d, n * d->page, any_page ? STEAL_GROWTH_ANY : STEAL_GROWTH);
  ca_stat_add(&d->stats.num_page_moves, (int64_t)(moved / d->page));
  if (moved) ca_trace_mem(d, CA_EV_PAGE_MOVE, addr, moved);
}

/* Fills the page cache up to n pages: new ones while memory is not short
 * (one chunk for all that are missing, a few more for small growths),
 * else pages moved out of free holes first, but not those that keep
 * coming back (churn.c); when a create fails, any pages moved, then new
 * ones again. */
static CUresult gather_pages(ca_device_t *d, size_t n, uintptr_t addr) {
  if (d->page_cache_count >= n) return CUDA_SUCCESS;
  bool moved = short_of_memory(d, n - d->page_cache_count);
  if (moved) move_pages(d, n - d->page_cache_count, addr, false);
  if (d->page_cache_count >= n) return CUDA_SUCCESS;
  size_t missing = n - d->page_cache_count, more = moved ? missing : chunk_pages(d, missing);
  CUresult rc = create_chunk(d, more);
  if (rc != CUDA_SUCCESS && more > missing) rc = create_chunk(d, missing);   /* the least, if more would not go */
  if (rc == CUDA_SUCCESS) return rc;
  move_pages(d, n - d->page_cache_count, addr, true);
  return d->page_cache_count >= n ? CUDA_SUCCESS : create_chunk(d, n - d->page_cache_count);
}

/* After a failure, pages [first, first+done) are mapped but may lack
 * access. Leaves them either accessible (returns done) or unmapped
 * (returns 0), retrying because a transient driver error can hit the undo
 * itself. */
static size_t settle(ca_device_t *d, ca_segment_t *seg, size_t first, size_t done) {
  uintptr_t addr = seg->base + first * d->page;
  for (int attempt = 0; done && attempt < 8; attempt++) {
    if (ca_grant_access(d, addr, done * d->page) == CUDA_SUCCESS)
      return done;
    if (unmap_runs(d, seg, first, first + done) == CUDA_SUCCESS) return 0;
  }
  if (done) ca_log("cannot settle %zu pages at %#lx: the driver keeps failing", done, (unsigned long)addr);
  return done;
}

CUresult ca_map_range(ca_device_t *d, ca_segment_t *seg, uintptr_t addr, size_t size, size_t *mapped) {
  size_t first = page_index(seg, addr), n = size / d->page;
  *mapped = 0;
  CUresult rc = gather_pages(d, n, addr);
  if (rc) return rc;
  ca_churn_mapped_back(seg, first, n);
  size_t done = 0;
  for (; done < n; done++) {
    ca_page_t pg = d->page_cache[d->page_cache_count - 1];
    rc = CA_CALL(d, backend_map, ca_state.be->map(addr + done * d->page, d->page, pg.chunk->handle,
                                                   pg.index * d->page));
    if (rc) break;
    seg->pages[first + done] = cache_take(d);
    set_mapped(seg, first + done, true);
  }
  ca_stat_add(&d->stats.mapped_bytes, (int64_t)(done * d->page));
  if (done) ca_trace_mem(d, CA_EV_SEGMENT_MAP, addr, done * d->page);
  if (!rc) rc = ca_grant_access(d, addr, size);
  *mapped = (rc ? settle(d, seg, first, done) : n) * d->page;
  return rc;
}

// ----------------------------------------------------------------------------
// Moving pages out of free blocks
// ----------------------------------------------------------------------------

typedef struct steal_s {
  ca_device_t *d;
  size_t want, got;
  steal_mode_t mode;
} steal_t;

/* Takes whole pages from the top of free mapped block b: b keeps its head,
 * the pages become a hole, and any tail past the last whole page stays. */
static bool steal_from(ca_block_t *b, void *arg) {
  CA_DEBUG_TALLY(steal_looks);
  steal_t *s = arg;
  ca_device_t *d = s->d;
  size_t pg = d->page;
  uintptr_t lo, hi;
  ca_whole_pages(b, pg, &lo, &hi);
  if (hi <= lo) return true;
  if (!ca_block_reserve(d, 2)) return false;   /* the splits below cannot fail */
  size_t take = (hi - lo) / pg, need = (s->want - s->got + pg - 1) / pg;
  if (take > need) take = need;
  ca_segment_t *seg = b->seg;
  if (s->mode == STEAL_GROWTH) take = ca_churn_movable(d, seg, page_index(seg, hi), take, s->want - s->got);
  if (!take) return true;
  uintptr_t cut = hi - take * pg;
  ca_pool_t *pool = seg->pool;
  size_t before = d->page_cache_count;
  if (unmap_runs(d, seg, page_index(seg, cut), page_index(seg, hi))) return false;
  if (s->mode != STEAL_TRIM) ca_churn_moved_out(seg, page_index(seg, cut), page_index(seg, hi));
  s->got += (d->page_cache_count - before) * pg;
  ca_bins_remove(&pool->bins, b);
  ca_block_t *hole = b, *tail = NULL;
  if (hi < b->addr + b->size) tail = ca_block_split(d, b, hi - b->addr);
  if (cut > b->addr) {
    hole = ca_block_split(d, b, cut - b->addr);
    ca_bins_insert(&pool->bins, b);
  }
  if (tail) ca_bins_insert(&pool->bins, tail);
  hole->kind = CA_HOLE;
  ca_block_coalesce_free(d, hole);
  return s->got < s->want;
}

static size_t steal(ca_device_t *d, size_t want, steal_mode_t mode) {
  if (!ca_config.expandable_segments) return 0;
  steal_t s = {d, want, 0, mode};
  /* The large pool first: its free blocks span more whole pages. A block
   * smaller than a page holds none: not looked at (at 64 streams, most of
   * the free blocks a growth used to walk). */
  for (int p = CA_POOL_LARGE; p >= CA_POOL_SMALL && s.got < want; p--)
    ca_bins_each_at_least(&d->pools[p].bins, d->page, steal_from, &s);
  return s.got;
}

size_t ca_steal_pages(ca_device_t *d, size_t want) { return steal(d, want, STEAL_TRIM); }

size_t ca_trim(ca_device_t *d, size_t target) {
  size_t before = (size_t)d->stats.reserved_bytes.current;
  release_cache(d);
  size_t now = (size_t)d->stats.reserved_bytes.current;
  if (now > target && ca_config.expandable_segments) {
    ca_steal_pages(d, now - target);
    release_cache(d);
  }
  if (!ca_config.expandable_segments && ((size_t)d->stats.reserved_bytes.current > target || d->leftovers))
    ca_classic_release_free(d);
  return before - (size_t)d->stats.reserved_bytes.current;
}
