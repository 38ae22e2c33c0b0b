/* The bins' bound (the largest size a bin may hold) as the allocation path
 * uses it: ca_bins_may_hold lets ca_pool_take skip a pool search that
 * cannot succeed (the top bin's bound is below the request), so
 *   - may_hold must say no only when no block is that large (unit test
 *     against a linear search, through inserts, removals and resizes);
 *   - the skip must not change where anything is placed: a random
 *     workload on two streams, run with and without the skip, hands out
 *     the same offsets (planted fault: may_hold reading the lowest bin,
 *     ca_debug.bins_may_hold_lowest), and a request exactly as large as
 *     the pool's largest block takes it over the stream's own larger
 *     pending block (planted fault: an exclusive bound,
 *     ca_debug.bins_may_hold_strict);
 *   - cudalloc_check must catch a block filed outside its size's bin or
 *     above its bin's bound (CA_CHECK_BINS), free or pending. */
#include "core_testing.h"

TestSuite(core_bins_bound, .fini = core_stop);

static ca_block_t *bare_block(size_t size) {
  ca_block_t *b = calloc(1, sizeof *b);
  cr_assert_not_null(b);
  b->size = size;
  return b;
}

/* 512 bytes to 64 MiB, spread over the powers of two. */
static size_t random_size(uint64_t *rng) {
  int shift = 9 + (int)(rng_next(rng) % 17);
  return ((size_t)1 << shift) + (rng_next(rng) % ((size_t)1 << shift) & ~(size_t)511);
}

#define NBLOCKS 12

Test(core_bins_bound, may_hold_says_no_only_when_no_block_is_as_large) {
  uint64_t rng = 11;
  ca_bins_t *bins = malloc(sizeof *bins);
  cr_assert_not_null(bins);
  ca_bins_init(bins);
  cr_assert_not(ca_bins_may_hold(bins, 512), "empty bins hold nothing");
  ca_block_t *blocks[NBLOCKS] = {0};
  int said_no = 0, said_yes = 0;
  for (int round = 0; round < 5000; round++) {
    ca_block_t **slot = &blocks[rng_next(&rng) % NBLOCKS];
    int op = (int)(rng_next(&rng) % 3);
    if (!*slot) {
      ca_bins_insert(bins, *slot = bare_block(random_size(&rng)));
    } else if (op == 0) {
      ca_bins_remove(bins, *slot);
      free(*slot);
      *slot = NULL;
    } else {   /* a split's rest or a merge's survivor */
      size_t old = (*slot)->size;
      (*slot)->size = random_size(&rng);
      ca_bins_resized(bins, *slot, old);
    }
    size_t want = random_size(&rng), largest = 0;
    for (int i = 0; i < NBLOCKS; i++)
      if (blocks[i] && blocks[i]->size > largest) largest = blocks[i]->size;
    if (!ca_bins_may_hold(bins, want)) {
      cr_assert_lt(largest, want, "round %d: may_hold said no to %zu with a block of %zu", round, want, largest);
      said_no += bins->count > 0;
    } else {
      said_yes++;
    }
    /* the largest block itself, exactly */
    if (largest) cr_assert(ca_bins_may_hold(bins, largest), "round %d: the largest block (%zu)", round, largest);
  }
  cr_assert(said_no > 100 && said_yes > 100, "both answers, with blocks in the bins: %d no, %d yes", said_no, said_yes);
  for (int i = 0; i < NBLOCKS; i++)
    if (blocks[i]) ca_bins_remove(bins, blocks[i]), free(blocks[i]);
  free(bins);
}

/* A random workload on two streams (core path only: no front cache),
 * with frees on the stream, cudaFree-like frees and fences released now
 * and then, so that pool blocks and the streams' pending blocks compete.
 * Writes each allocation's offset in the reservation; returns how many. */
#define OPS 3000
#define SLOTS 24

static int placements(const char *conf, uintptr_t *offsets) {
  core_start(conf);
  ca_stream_t streams[2] = {test_stream(false), test_stream(false)};
  static const size_t fixed[] = {4096, 65536, 1 << 20, 3 << 20, 512 * 3};
  struct { void *p; int s; } slot[SLOTS] = {{0}};
  uint64_t rng = 5;
  int n = 0;
  for (int op = 0; op < OPS; op++) {
    int i = (int)(rng_next(&rng) % SLOTS);
    if (slot[i].p) {
      cudaError_t rc = rng_next(&rng) % 8 ? cudalloc_free(slot[i].p, (cudaStream_t)streams[slot[i].s])
                                           : cudalloc_free_sync(slot[i].p);
      cr_assert_eq(rc, cudaSuccess);
      slot[i].p = NULL;
    } else {
      size_t size = rng_next(&rng) % 2 ? fixed[rng_next(&rng) % 5] : 512 + rng_next(&rng) % (4u << 20);
      slot[i].s = (int)(rng_next(&rng) % 2);
      /* a failure (a planted fault's skip of a pool that had the block) differs from any offset */
      cudaError_t rc = cudalloc_malloc(&slot[i].p, size, (cudaStream_t)streams[slot[i].s]);
      offsets[n++] = rc ? UINTPTR_MAX : (uintptr_t)slot[i].p - dev0()->va_base;
      if (rc) slot[i].p = NULL;
    }
    if (op % 40 == 39) seal_and_poll();
    CHECK_CONSISTENT();
  }
  core_stop();
  return n;
}

/* The first allocation that went elsewhere than with the pool searched
 * every time, or -1; fault: ca_debug's switch to plant (NULL: none). */
static int first_difference(bool *fault) {
  static uintptr_t with_skip[OPS], reference[OPS];
  const char *conf = "expandable_segments:true,thread_cache_kb:0,sim_events:auto,sim_capacity_mb:1024,oom_report:off";
  ca_debug.pool_search_always = true;
  int n_ref = placements(conf, reference);
  ca_debug.pool_search_always = false;
  if (fault) *fault = true;
  int n = placements(conf, with_skip);
  if (fault) *fault = false;
  int common = n < n_ref ? n : n_ref;
  for (int i = 0; i < common; i++)
    if (with_skip[i] != reference[i]) return i;
  return n == n_ref ? -1 : common;
}

Test(core_bins_bound, skipping_the_pool_search_places_every_block_where_the_search_would) {
  SKIP_ON_CUDA("compares placements on the simulated device");
  int at = first_difference(NULL);
  cr_assert_eq(at, -1, "allocation %d went elsewhere than with the pool searched every time", at);
}

/* The fault's skips run out of memory too: the reports are silenced. */
Test(core_bins_bound, a_skip_that_reads_the_wrong_bin_is_caught, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("compares placements on the simulated device");
  cr_assert_geq(first_difference(&ca_debug.bins_may_hold_lowest), 0, "a skip on the lowest bin's bound changed no placement");
}

/* The boundary: the pool's largest block is exactly the request, and the
 * stream's own pending block is larger. The pool's block is the tighter
 * fit and must be taken (ca_bins_may_hold is inclusive). Returns whether
 * it was. */
static bool takes_the_pools_largest_block(bool *fault, bool planted) {
  core_start("expandable_segments:true,thread_cache_kb:0,sim_events:auto");
  ca_stream_t s = test_stream(false);
  void *a, *x, *g1, *g2;
  cr_assert_eq(cudalloc_malloc(&a, 256 << 10, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&g1, 4096, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&x, 768 << 10, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&g2, 4096, (cudaStream_t)s), cudaSuccess);
  ca_block_t *ab = ca_ptrmap_get(&dev0()->live, (uintptr_t)a);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  seal_and_poll();
  ca_block_t *xb = ca_ptrmap_get(&dev0()->live, (uintptr_t)x);
  cr_assert_eq(xb->seg->pool, ab->seg->pool, "both in the small pool");
  cr_assert(ab->state == CA_FREE && ab->in_bins, "the 256 KiB block is free in the pool");
  ca_bins_t *pool = &ab->seg->pool->bins;
  /* What else the pool holds that is larger (the mapped rest) is taken. */
  for (int i = 0; i < 8 && ca_bins_largest(pool) != ab; i++) {
    void *filler;
    cr_assert_eq(cudalloc_malloc(&filler, ca_bins_largest(pool)->size, (cudaStream_t)s), cudaSuccess);
  }
  cr_assert_eq(ca_bins_largest(pool), ab, "the 256 KiB block is the pool's largest");
  cr_assert_eq(cudalloc_free(x, (cudaStream_t)s), cudaSuccess);   /* the stream's own, larger, pending */
  CHECK_CONSISTENT();
  *fault = planted;
  void *p;
  cr_assert(xb->state == CA_PENDING && xb->in_bins, "the 768 KiB block waits in the stream's bins");
  cr_assert_eq(cudalloc_malloc(&p, 256 << 10, (cudaStream_t)s), cudaSuccess);
  CHECK_CONSISTENT();
  cr_assert(p == a || p == x, "one of the two blocks");
  return p == a;
}

Test(core_bins_bound, a_request_as_large_as_the_pools_largest_block_searches_the_pool) {
  SKIP_ON_CUDA("lays out blocks on the simulated device");
  cr_assert(takes_the_pools_largest_block(&ca_debug.bins_may_hold_strict, false),
            "the stream's own larger block was taken over the pool's exact fit");
}

Test(core_bins_bound, a_skip_that_excludes_the_bound_itself_is_caught) {
  SKIP_ON_CUDA("lays out blocks on the simulated device");
  cr_assert_not(takes_the_pools_largest_block(&ca_debug.bins_may_hold_strict, true),
                "the off-by-one skip still searched the pool");
}

// ----------------------------------------------------------------------------
// The checker
// ----------------------------------------------------------------------------

/* A free block (the mapped rest of the first page after a 4 KiB block),
 * and a pending one (a 64 KiB block freed on a stream, kept apart from the
 * free rest by a live block after it). */
typedef struct scene_s {
  ca_block_t *free, *pending;
  ca_bins_t *free_bins, *pending_bins;
} scene_t;

static scene_t scene(void) {
  SKIP_ON_CUDA("corrupts the simulated device's bins");
  core_start("expandable_segments:true,thread_cache_kb:0");
  ca_stream_t s = test_stream(false);
  void *a, *p, *guard;
  cr_assert_eq(cudalloc_malloc(&a, 4096, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&p, 65536, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&guard, 4096, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
  scene_t sc;
  sc.pending = ca_ptrmap_get(&dev0()->live, (uintptr_t)guard)->prev;
  sc.free = sc.pending->next->next;
  cr_assert(sc.pending->state == CA_PENDING && sc.pending->in_bins && sc.pending->size == 65536);
  cr_assert(sc.free->state == CA_FREE && sc.free->kind == CA_MAPPED && sc.free->in_bins);
  sc.free_bins = &sc.free->seg->pool->bins;
  sc.pending_bins = sc.pending->queue->bins[sc.pending->seg->pool->id];
  CHECK_CONSISTENT();
  return sc;
}

static size_t *bound_of(ca_bins_t *bins, const ca_block_t *b) { return &bins->bound[b->bin_fl][b->bin_sl]; }

static void expect_bins_fault(const char *what) {
  cr_assert_eq(cudalloc_check(), CA_CHECK_BINS, "%s", what);
  cr_assert(strstr(captured_stderr(), "not in its size's bin"), "the broken invariant is named on stderr");
}

Test(core_bins_bound, a_bound_below_a_free_block_is_caught, .init = cr_redirect_stderr) {
  scene_t s = scene();
  size_t *bound = bound_of(s.free_bins, s.free), keep = *bound;
  *bound = s.free->size - CA_MIN_BLOCK;   /* a resize that grew the block and left the bound behind */
  expect_bins_fault("a free block above its bin's bound");
  *bound = keep;
  cr_assert_eq(cudalloc_check(), CA_CHECK_OK, "repaired");
}

Test(core_bins_bound, a_bound_below_a_pending_block_is_caught, .init = cr_redirect_stderr) {
  scene_t s = scene();
  size_t *bound = bound_of(s.pending_bins, s.pending), keep = *bound;
  *bound = s.pending->size - CA_MIN_BLOCK;
  expect_bins_fault("a pending block above its bin's bound");
  *bound = keep;
  cr_assert_eq(cudalloc_check(), CA_CHECK_OK, "repaired");
}

Test(core_bins_bound, a_block_marked_in_another_bin_is_caught, .init = cr_redirect_stderr) {
  scene_t s = scene();
  uint8_t keep = s.free->bin_sl;
  s.free->bin_sl = (uint8_t)((keep + 1) % CA_BINS_SL);   /* what a resize that stays in its old bin leaves */
  expect_bins_fault("a free block filed as another bin's");
  s.free->bin_sl = keep;
  cr_assert_eq(cudalloc_check(), CA_CHECK_OK, "repaired");
}
