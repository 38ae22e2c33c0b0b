/* A small front-cache miss takes a block of a larger class (alloc/tcache.c,
 * take_near): the first cached block of its stream and call site whose
 * size is at most an eighth above the request's class, from 4 KiB up. The
 * rule's bound has a twin test with a test-only switch that breaks it
 * (tcache_near_any: any larger class); a hit that took a smaller block
 * would be caught by cudalloc_check (CHECK_CONSISTENT, CA_CHECK_SIZE). */
#include "tcache_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's oracle and counters"); }
TestSuite(core_tcache_near, .init = sim_only, .fini = tcache_fini);

#define KiB (1u << 10)

/* Another call site than alloc_on's. */
static __attribute__((noinline)) void *alloc_elsewhere(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess, "%zu bytes", size);
  return p;
}

#define ROUNDS 5      /* the stack memo knows a stack by then (test_core_tcache_inline.c) */

static uint64_t near_tries;   /* the last request's: whether it went through the near try */

/* A block of `cached` bytes freed on s into the cache, then a request of
 * `asked` bytes on s: whether it got that block. near_any plants the fault.
 * track:backtrace takes the front's full try (malloc_full: only off,
 * caller and a stack the memo knows are answered inline, track.h); the
 * default tracking, stacks the thread's memo knows, the inline try and its
 * NEAR answer (malloc_near, alloc.c). */
static bool gets_cached(const char *conf, size_t cached, size_t asked, bool near_any) {
  core_start(conf);
  ca_debug.tcache_near_any = near_any;
  ca_stream_t s = new_stream();
  /* every request from one stack, so that the call site of the block and
   * of the last request is the same under every tracking (a hit needs it),
   * and the thread's stack memo knows it by the last round */
  void *got[ROUNDS];
  const size_t size[2] = {cached, asked};
  uint64_t hits = 0;
  int64_t core = 0;
  for (int r = 0; r < ROUNDS; r++) {
    if (r) free_on(got[r - 1], s);
    if (opaque(r) == ROUNDS - 1) {
      cr_assert_eq(cached_bytes(), (int64_t)cached, "the block is in the thread's cache");
      hits = ca_debug.tcache_hits;
      core = dev0()->stats.num_allocs.total;
      near_tries = ca_debug.tcache_near_tries;
    }
    got[r] = alloc_on(size[opaque(r) == ROUNDS - 1], s);   /* a load, not a branch: one call */
  }
  void *p = got[ROUNDS - 2], *q = got[ROUNDS - 1];
  near_tries = ca_debug.tcache_near_tries - near_tries;
  bool took = q == p;
  cr_assert_eq(ca_debug.tcache_hits - hits, took ? 1u : 0u, "a hit exactly when it got the cached block");
  cr_assert_eq(dev0()->stats.num_allocs.total, core + (took ? 0 : 1), "the core served the miss alone");
  if (took) {
    size_t size = 0;
    cr_assert_eq(cudalloc_get_address_range(q, NULL, &size), cudaSuccess);
    cr_assert_eq(size, asked, "the range is what the program asked for");
    cudalloc_stats_t st = stats0();
    cr_assert_eq(st.requested_bytes.current, (int64_t)asked);
    cr_assert_eq(block_size(q), cached, "the block was not cut");
    cr_assert_eq(st.allocated_bytes.current, (int64_t)cached, "the whole block is allocated");
  } else {
    cr_assert_eq(cached_bytes(), (int64_t)cached, "the cached block stayed cached");
  }
  CHECK_CONSISTENT();
  ca_debug.tcache_near_any = false;
  free_on(q, s);
  CHECK_CONSISTENT();
  return took;
}

static bool asked_gets_cached(size_t cached, size_t asked, bool near_any) {
  bool took = gets_cached("track:backtrace,sim_events:auto", cached, asked, near_any);
  cr_assert_eq(near_tries, 0, "the full try answered, not the near one");
  return took;
}

/* The default tracking: the last request's stack is the earlier rounds',
 * which the thread's memo knows by then, so the inline try runs. */
static bool asked_inline_gets_cached(size_t cached, size_t asked, bool near_any) {
  bool took = gets_cached("sim_events:auto", cached, asked, near_any);
  cr_assert_eq(near_tries, 1, "the inline try sent the miss to the near try");
  return took;
}

/* 37 KiB's class is 37 KiB; 40 KiB is within an eighth above it (41.6 KiB). */
Test(core_tcache_near, a_miss_takes_a_block_up_to_an_eighth_larger) {
  cr_assert(asked_gets_cached(40 * KiB, 37 * KiB, false));
}

Test(core_tcache_near, the_inline_try_sends_such_a_miss_to_the_near_try) {
  cr_assert(asked_inline_gets_cached(40 * KiB, 37 * KiB, false));
}

Test(core_tcache_near, the_near_try_keeps_the_bound) {
  cr_assert_not(asked_inline_gets_cached(48 * KiB, 37 * KiB, false));
}

Test(core_tcache_near, the_near_try_without_the_bound_takes_a_far_larger_block) {
  cr_assert(asked_inline_gets_cached(48 * KiB, 37 * KiB, true), "the planted fault must be visible");
}

Test(core_tcache_near, its_bound_is_an_eighth_of_the_class) {
  cr_assert(asked_gets_cached(37 * KiB + 9 * 512, 37 * KiB, false), "41.5 KiB: the last class within the eighth");
}

Test(core_tcache_near, past_its_bound_the_block_stays_cached) {
  cr_assert_not(asked_gets_cached(37 * KiB + 10 * 512, 37 * KiB, false), "42 KiB: past it");
}

/* 48 KiB is 30% above 37 KiB: the request goes to the core, the block
 * stays cached. With the bound broken the same request takes it. */
Test(core_tcache_near, a_block_more_than_an_eighth_larger_stays_cached) {
  cr_assert_not(asked_gets_cached(48 * KiB, 37 * KiB, false));
}

Test(core_tcache_near, without_the_bound_a_far_larger_block_is_taken) {
  cr_assert(asked_gets_cached(48 * KiB, 37 * KiB, true), "the planted fault must be visible");
}

Test(core_tcache_near, a_smaller_block_is_never_taken) {
  cr_assert_not(asked_gets_cached(36 * KiB, 37 * KiB, false));
}

Test(core_tcache_near, a_smaller_block_is_never_taken_even_without_the_bound) {
  cr_assert_not(asked_gets_cached(36 * KiB, 37 * KiB, true));
}

/* Under 4 KiB the next class is more than an eighth away: exact classes
 * only (2 KiB is a third above 1.5 KiB); from 4 KiB on, the next class is. */
Test(core_tcache_near, small_classes_take_their_own_size_only) {
  cr_assert_not(asked_gets_cached(2 * KiB, 1536, false));
}

Test(core_tcache_near, from_4_kib_the_next_class_is_near) {
  cr_assert(asked_gets_cached(4 * KiB + 512, 4 * KiB, false), "4.5 KiB for 4 KiB: an eighth above");
}

/* A larger class's block keeps the site rule of the hits: blocks from
 * another call site stay where their site's totals counted them. */
Test(core_tcache_near, a_block_of_another_call_site_is_not_taken) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t s = new_stream();
  void *p = alloc_on(40 * KiB, s);
  free_on(p, s);
  void *q = alloc_elsewhere(37 * KiB, s);
  cr_assert_neq(q, p);
  cr_assert_eq(cached_bytes(), 40 * KiB);
  CHECK_CONSISTENT();
  free_on(q, s);
}

/* A request on another stream never gets it (the lists are per stream). */
Test(core_tcache_near, another_stream_does_not_get_it) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream(), b = new_stream();
  void *p = alloc_on(40 * KiB, a);
  free_on(p, a);
  void *q = alloc_on(37 * KiB, b);
  cr_assert_neq(q, p);
  CHECK_CONSISTENT();
  free_on(q, b);
}

/* What it is for: a stream's few cached blocks of sizes that vary serve
 * requests near their sizes. 16 live blocks of 4 to 49.5 KiB, each freed
 * and asked for again 1 to 5% smaller: every request takes its block back,
 * half of them or more from a class above their own (exact classes missed
 * those). */
Test(core_tcache_near, requests_near_cached_sizes_hit) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t s = new_stream();
  void *live[16];
  size_t size[16];
  for (int i = 0; i < 16; i++) live[i] = alloc_on(size[i] = (size_t)(4 + 3 * i) * KiB + 512 * (size_t)(i % 3), s);
  uint64_t hits = ca_debug.tcache_hits;
  int other_class = 0;
  for (int i = 0; i < 16; i++) {
    free_on(live[i], s);
    size_t smaller = size[i] - size[i] * (size_t)(1 + i % 5) / 100;
    other_class += (smaller - 1) / 512 != (size[i] - 1) / 512;
    cr_assert_eq(alloc_on(smaller, s), live[i], "request %d (%zu bytes for a block of %zu)", i, smaller, size[i]);
  }
  cr_assert_eq(ca_debug.tcache_hits - hits, 16);
  cr_assert_geq(other_class, 8, "half the requests were of a class below their block's (%d)", other_class);
  for (int i = 0; i < 16; i++) free_on(live[i], s);
  CHECK_CONSISTENT();
}

/* The inline try's miss tells whether its list still holds blocks (a near
 * try may find one there) before it lets the thread's cache go: another
 * thread's flush may take them from then on. The count was read after the
 * let-go, a data race with the flush (flush_lists) that ThreadSanitizer
 * found in test_stress_threads' many-streams run. Here one thread misses
 * near a cached block, pausing after each let-go (the test-only switch
 * tcache_miss_pause holds the window open), while another empties every
 * cache: under make test-tsan the read after the let-go is reported. */
#define RACING_ROUNDS 400
static struct {
  ca_stream_t s;
  int done, failed;   /* failed: calls that did not succeed (no assertion off the test's thread) */
} racing;

/* Never inlined: each of its two calls below is the same stack every
 * round, which the stack memo knows after one, so that the requests take
 * the inline try. */
static __attribute__((noinline)) void *racing_alloc(size_t size) {
  void *p = NULL;
  return cudalloc_malloc(&p, size, (cudaStream_t)racing.s) == cudaSuccess ? p : (racing.failed++, NULL);
}

static void *miss_near_a_cached_block(void *arg) {
  (void)arg;
  for (int i = 0; i < RACING_ROUNDS; i++) {
    void *big = racing_alloc(64 * KiB), *p;
    if (big && cudalloc_free(big, (cudaStream_t)racing.s) != cudaSuccess) racing.failed++;   /* cached: its list holds a block */
    if ((p = racing_alloc(8 * KiB)) && cudalloc_free_sync(p) != cudaSuccess)   /* a miss whose class has near ones, */
      racing.failed++;   /* given to the core: the next one misses again */
  }
  __atomic_store_n(&racing.done, 1, __ATOMIC_RELEASE);
  return NULL;
}

Test(core_tcache_near, a_miss_reads_its_list_before_a_flush_may_empty_it) {
  core_start("sim_events:auto");
  racing.s = new_stream();
  racing.done = racing.failed = 0;
  ca_debug.tcache_miss_pause = true;
  uint64_t near = ca_debug.tcache_near_tries;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, miss_near_a_cached_block, NULL), 0);
  int empties = 0;
  while (!__atomic_load_n(&racing.done, __ATOMIC_ACQUIRE)) {
    cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
    empties++;
    ca_debug_pause();   /* the other thread gets the device lock between two */
  }
  pthread_join(t, NULL);
  ca_debug.tcache_miss_pause = false;
  cr_assert_eq(racing.failed, 0, "%d calls of the missing thread failed", racing.failed);
  cr_assert_gt(empties, 0);
  cr_assert_gt(ca_debug.tcache_near_tries, near, "no miss went to the near try: the read under test never ran");
  CHECK_CONSISTENT();
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  cr_assert_eq(stats0().allocated_bytes.current, 0);
}
