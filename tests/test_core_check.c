/* The invariant checker (cudalloc_check, alloc/check.h): each of its codes
 * is provoked by corrupting exactly one invariant behind the allocator's
 * back, and must come back exactly; repairing the corruption must bring
 * the check back to 0, so that the code is due to that corruption alone. */
#include "core_testing.h"

#include <criterion/parameterized.h>

TestSuite(core_check, .fini = cudalloc_shutdown);

/* The state every case corrupts: one live block of 4 KiB at the start of
 * the small region, the free mapped rest of its page, then the hole of
 * unmapped pages (expandable segments). */
typedef struct scene_s {
  void *p;
  ca_block_t *live, *free, *hole;
  ca_pool_t *pool;
} scene_t;

static scene_t scene(void) {
  SKIP_ON_CUDA("pages and blocks are laid out as on the simulated device");
  core_start("expandable_segments:true,thread_cache_kb:0");   /* a stream free reaches the queue */
  scene_t s;
  cr_assert_eq(cudalloc_malloc(&s.p, 4096, 0), cudaSuccess);
  s.live = ca_ptrmap_get(&dev0()->live, (uintptr_t)s.p);
  s.free = s.live->next;
  s.hole = s.free->next;
  s.pool = s.live->seg->pool;
  cr_assert(s.free->state == CA_FREE && s.free->kind == CA_MAPPED && s.free->in_bins);
  cr_assert(s.hole->state == CA_FREE && s.hole->kind == CA_HOLE && s.hole->in_bins);
  CHECK_CONSISTENT();
  return s;
}

static size_t page_of(const ca_block_t *b) { return (b->addr - b->seg->base) / dev0()->page; }

static void flip_page(ca_segment_t *seg, size_t page) { seg->mapped[page / 64] ^= 1ull << (page % 64); }

/* Breaks the invariant that `code` names (repair: false), or mends it
 * (repair: true). */
static void corrupt(int code, scene_t *s, bool repair) {
  ca_device_t *d = dev0();
  int sign = repair ? -1 : 1;
  switch (code) {
  case CA_CHECK_TILING:          /* the next block no longer starts where this one ends */
    s->live->size += (size_t)(sign * (int)CA_MIN_BLOCK);
    break;
  case CA_CHECK_SIZE:            /* not a multiple of CA_MIN_BLOCK */
    s->live->size += (size_t)sign;
    break;
  case CA_CHECK_UNCOALESCED: {   /* one free block filed as two neighbours */
    ca_bins_remove(&s->pool->bins, s->free);
    if (!repair) {
      ca_block_t *rest = ca_block_split(d, s->free, CA_MIN_BLOCK);
      ca_bins_insert(&s->pool->bins, rest);
    } else {
      ca_bins_remove(&s->pool->bins, s->free->next);
      ca_block_absorb_next(d, s->free);
    }
    ca_bins_insert(&s->pool->bins, s->free);
    break;
  }
  case CA_CHECK_BINS:            /* a free block missing from its bins */
    if (repair) ca_bins_insert(&s->pool->bins, s->free);
    else ca_bins_remove(&s->pool->bins, s->free);
    break;
  case CA_CHECK_UNMAPPED_LIVE:   /* the live block's page marked unmapped */
    flip_page(s->live->seg, page_of(s->live));
    break;
  case CA_CHECK_HOLE:            /* a page of the hole marked mapped */
    flip_page(s->hole->seg, page_of(s->hole));
    break;
  case CA_CHECK_LIVE_MAP:        /* a live block the pointer map forgot */
    if (repair) cr_assert(ca_ptrmap_insert(&d->live, s->live));
    else cr_assert_eq(ca_ptrmap_remove(&d->live, s->live->addr), s->live);
    break;
  case CA_CHECK_QUEUE: {         /* a pending block out of its stream queue's bins */
    ca_queue_t *q = s->live->queue;
    if (repair) ca_bins_insert(q->bins[s->pool->id], s->live);
    else ca_bins_remove(q->bins[s->pool->id], s->live);
    break;
  }
  case CA_CHECK_STATS:           /* a statistic that no block accounts for */
    d->stats.allocated_bytes.current += sign * (int64_t)CA_MIN_BLOCK;
    break;
  case CA_CHECK_CHUNKS:          /* a chunk counts a page cached that is mapped */
    d->chunks->cached += (size_t)sign;
    break;
  default:
    cr_assert_fail("no corruption for checker code %d", code);
  }
}

/* Every code but CA_CHECK_OK, once. */
ParameterizedTestParameters(core_check, each_code) {
  static int codes[] = {CA_CHECK_TILING,    CA_CHECK_SIZE,          CA_CHECK_UNCOALESCED,
                        CA_CHECK_BINS,      CA_CHECK_UNMAPPED_LIVE, CA_CHECK_HOLE,
                        CA_CHECK_LIVE_MAP,  CA_CHECK_QUEUE,         CA_CHECK_STATS,
                        CA_CHECK_CHUNKS};
  _Static_assert(sizeof codes / sizeof *codes == CA_CHECK_CODES - 1, "one case per checker code");
  return cr_make_param_array(int, codes, sizeof codes / sizeof *codes);
}

ParameterizedTest(int *code, core_check, each_code, .init = cr_redirect_stderr) {
  scene_t s = scene();
  if (*code == CA_CHECK_QUEUE) {   /* the live block becomes pending in the legacy stream's queue */
    cr_assert_eq(cudalloc_free(s.p, 0), cudaSuccess);
    cr_assert(s.live->state == CA_PENDING && s.live->in_bins);
    CHECK_CONSISTENT();
  }
  corrupt(*code, &s, false);
  cr_assert_eq(cudalloc_check(), *code, "corrupting for code %d", *code);
  cr_assert(strstr(captured_stderr(), "cudalloc: check: "), "the broken invariant is named on stderr");
  corrupt(*code, &s, true);
  cr_assert_eq(cudalloc_check(), CA_CHECK_OK, "repaired after code %d", *code);
}
