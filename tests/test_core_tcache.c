/* The per-thread, per-stream front cache of small blocks (alloc/tcache.c):
 * a stream-ordered free of a small block goes into the freeing thread's
 * cache and only that thread, on that stream, gets it back, without the
 * core; every flush gives the blocks back; the statistics the program
 * reads count them as freed. Each guard has a twin test with a test-only
 * switch that breaks it (tcache_any_stream, tcache_no_flush). */
#include "tcache_testing.h"

#include <pthread.h>

#include "sitelive.h"

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's oracle and counters"); }
TestSuite(core_tcache, .init = sim_only, .fini = tcache_fini);

#define SMALL 4096

/* The core serves no allocation of a warm pair: its own count (what it
 * served) stands still while the program's count grows. */
Test(core_tcache, warm_pairs_do_not_enter_the_core) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t s = new_stream();
  free_on(alloc_on(SMALL, s), s);
  int64_t core = dev0()->stats.num_allocs.total, program = stats0().num_allocs.total;
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < 100; i++) free_on(alloc_on(SMALL - 16 * (i % 8), s), s);
  cr_assert_eq(dev0()->stats.num_allocs.total, core, "the core served none of them");
  cr_assert_eq(ca_debug.tcache_hits - hits, 100);
  cudalloc_stats_t st = stats0();
  cr_assert_eq(st.num_allocs.total, program + 100, "the program's count has them all");
  cr_assert_eq(st.num_frees.total, st.num_allocs.total);
  cr_assert_eq(st.allocated_bytes.current, 0, "nothing is allocated to the program");
  cr_assert_eq(st.num_live_blocks.current, 0);
  cr_assert_eq(st.requested_bytes.current, 0);
  CHECK_CONSISTENT();
}

/* With the cache off the same pairs enter the core: the count above is the
 * one that sees them. */
Test(core_tcache, without_the_cache_the_core_serves_every_pair) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:0");
  ca_stream_t s = new_stream();
  free_on(alloc_on(SMALL, s), s);
  int64_t core = dev0()->stats.num_allocs.total;
  for (int i = 0; i < 100; i++) free_on(alloc_on(SMALL, s), s);
  cr_assert_eq(dev0()->stats.num_allocs.total, core + 100);
}

#define ANOTHER_STREAM(break_guard) another_stream_gets_the_cached_block("track:caller,sim_events:manual", SMALL, break_guard)

Test(core_tcache, a_cached_block_is_never_handed_to_another_stream) {
  cr_assert_not(ANOTHER_STREAM(false));
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(core_tcache, a_hit_on_another_stream_is_caught_by_the_oracle, .init = cr_redirect_stderr) {
  cr_assert(ANOTHER_STREAM(true), "the switch did not plant the reuse");
  cr_assert_eq(ca_sim_oracle_violations(), 1, "the oracle judged the hit's hand-out");
  ca_sim_oracle_reset();
}

Test(core_tcache, the_freeing_stream_reuses_at_once) {
  core_start("track:caller,sim_events:manual");
  ca_stream_t a = new_stream();
  void *p = alloc_on(SMALL, a);
  TOUCH(a, p, SMALL, true);
  free_on(p, a);
  cr_assert_eq(alloc_on(SMALL, a), p, "work on A is ordered: A reuses p from the cache");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  CHECK_CONSISTENT();
}

static void *alloc_elsewhere(void *arg) {
  void *p = NULL;
  ca_state.be->set_device(0);
  if (cudalloc_malloc(&p, SMALL, (cudaStream_t)arg) != cudaSuccess) return NULL;
  return p;
}

Test(core_tcache, another_thread_does_not_get_the_cached_block) {
  core_start("track:caller,sim_events:manual");
  ca_stream_t a = new_stream();
  void *p = alloc_on(SMALL, a);
  free_on(p, a);
  pthread_t t;
  void *q = NULL;
  pthread_create(&t, NULL, alloc_elsewhere, a);
  pthread_join(t, &q);
  cr_assert_not_null(q);
  cr_assert_neq(q, p, "the block waits in this thread's cache");
  cr_assert_eq(alloc_on(SMALL, a), p);
  CHECK_CONSISTENT();
}

/* A device of 64 MiB; 56 MiB of small blocks freed on A, most of them into
 * the cache (a thread remembers a bounded number of the blocks it holds);
 * then a 40 MiB cudaMalloc, which fits only with the cached bytes back.
 * Returns whether it succeeded. */
static bool big_request_after_caching(bool no_flush) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:64,thread_cache_kb:65536");
  ca_debug.tcache_no_flush = no_flush;
  ca_stream_t a = new_stream();
  enum { N = 56 * 16 };   /* 64 KiB each */
  static void *p[N];
  for (int i = 0; i < N; i++) p[i] = alloc_on(64 << 10, a);
  for (int i = 0; i < N; i++) free_on(p[i], a);
  cr_assert_gt(cached_bytes(), 32 * MiB, "most blocks are in the cache (%lld bytes)", (long long)cached_bytes());
  return sync_request_succeeds(40 * MiB);
}

Test(core_tcache, out_of_memory_flushes_the_caches_and_recovers_their_bytes) {
  cr_assert(big_request_after_caching(false));
  cr_assert_eq(cached_bytes(), 0, "the slow path gave every cached block back");
}

Test(core_tcache, without_the_flush_the_cached_bytes_are_lost) {
  cr_assert_not(big_request_after_caching(true), "the cached 56 MiB would have been missing");
}

Test(core_tcache, the_cap_bounds_what_a_thread_holds) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:64");
  ca_stream_t a = new_stream();
  void *p[32];
  for (int i = 0; i < 32; i++) p[i] = alloc_on(SMALL, a);
  for (int i = 0; i < 32; i++) free_on(p[i], a);
  cr_assert_eq(cached_bytes(), 64 << 10, "16 of the 32 blocks, 64 KiB, went to the cache");
  cr_assert_eq(stats0().allocated_bytes.current, 0, "all 32 are freed");
  CHECK_CONSISTENT();
}

Test(core_tcache, destroying_the_stream_gives_its_blocks_back) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  free_on(alloc_on(SMALL, a), a);
  cr_assert_eq(dev0()->live.count, 1, "the cached block is live to the core");
  ca_stream_destroyed(a);
  cr_assert_eq(dev0()->live.count, 0, "and no more once its stream is gone");
  cr_assert_eq(cached_bytes(), 0);
  CHECK_CONSISTENT();
}

static void *cache_and_exit(void *arg) {
  ca_state.be->set_device(0);
  void *p = NULL;
  if (cudalloc_malloc(&p, SMALL, (cudaStream_t)arg) == cudaSuccess) cudalloc_free(p, (cudaStream_t)arg);
  return p;
}

Test(core_tcache, an_exiting_thread_gives_its_cache_back) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  pthread_t t;
  void *p = NULL;
  pthread_create(&t, NULL, cache_and_exit, a);
  pthread_join(t, &p);
  cr_assert_not_null(p);
  cr_assert_eq(dev0()->live.count, 0, "the thread's cached block went back at its exit");
  CHECK_CONSISTENT();
}

Test(core_tcache, a_double_free_of_a_cached_block_is_refused, .init = cr_redirect_stderr) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  void *p = alloc_on(SMALL, a);
  free_on(p, a);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)a), cudaErrorInvalidValue, "freed twice on its stream");
  cr_assert_eq(cudalloc_free_sync(p), cudaErrorInvalidValue, "then with cudaFree");
  cr_assert(strstr(captured_stderr(), "a double free"), "%s", captured_stderr());
  cr_assert_eq(cudalloc_get_address_range(p, NULL, NULL), cudaErrorInvalidValue, "a freed block has no range");
  cr_assert_eq(alloc_on(SMALL, a), p, "the cache is intact");
  CHECK_CONSISTENT();
}

/* A hit hands the block out for its new size: what the program asked for
 * is what the range and the statistics say. */
Test(core_tcache, a_hit_takes_the_new_requested_size) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  void *p = alloc_on(1000, a);
  free_on(p, a);
  cr_assert_eq(alloc_on(900, a), p);
  size_t size = 0;
  cr_assert_eq(cudalloc_get_address_range(p, NULL, &size), cudaSuccess);
  cr_assert_eq(size, 900);
  cr_assert_eq(stats0().requested_bytes.current, 900);
  CHECK_CONSISTENT();
  free_on(p, a);
  cr_assert_eq(stats0().requested_bytes.current, 0);
  CHECK_CONSISTENT();
}

/* A block's call site counts the requested bytes it was counted with:
 * a hit changes the block's requested size without the device lock, so
 * the site must not take the new size off when the block leaves it (a
 * flush, or a core free). Before, this left the site with 100 bytes
 * requested and no block (1000 counted, 900 taken off). */
Test(core_tcache, a_site_gives_back_the_requested_bytes_it_counted) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  void *p = alloc_on(1000, a);
  free_on(p, a);
  cr_assert_eq(alloc_on(900, a), p, "the hit");
  free_on(p, a);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);   /* the flush gives the block back to the core */
  ca_device_t *d = dev0();
  ca_devlock_take(&d->lock);
  const ca_sitelive_t *t = ca_sitelive_of(d);
  int64_t requested = t->lost.requested, count = t->lost.count;
  for (size_t i = 0; i < t->cap; i++) requested += t->slots[i].requested, count += t->slots[i].count;
  ca_devlock_release(&d->lock);
  cr_assert_eq(count, 0, "no block is live");
  cr_assert_eq(requested, 0, "the sites still say %lld bytes requested", (long long)requested);
  CHECK_CONSISTENT();
}

Test(core_tcache, shutdown_reports_no_cached_block_as_a_leak) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t a = new_stream();
  free_on(alloc_on(SMALL, a), a);
  capture_t c;
  capture_begin(&c);
  cudalloc_shutdown();
  char buf[4096];
  const char *out = capture_end(&c, buf, sizeof buf);
  cr_assert_null(strstr(out, "Leaked"), "%s", out);
  cr_assert_null(strstr(out, "live block"), "%s", out);
}

/* Another thread's cache, while that thread lives: the slow path first
 * tries its own thread's cache, then, short of memory, every cache. */
typedef struct holder_s {
  ca_stream_t stream;
  pthread_barrier_t cached, done;
} holder_t;

static void *cache_then_wait(void *arg) {
  holder_t *h = arg;
  ca_state.be->set_device(0);
  enum { N = 56 * 16 };
  static void *p[N];
  for (int i = 0; i < N; i++)
    if (cudalloc_malloc(&p[i], 64 << 10, (cudaStream_t)h->stream) != cudaSuccess) p[i] = NULL;
  for (int i = 0; i < N; i++) cudalloc_free(p[i], (cudaStream_t)h->stream);
  pthread_barrier_wait(&h->cached);
  pthread_barrier_wait(&h->done);   /* alive, its cache intact, until the main thread is done */
  return NULL;
}

static bool big_request_beside_another_threads_cache(bool no_flush) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:64,thread_cache_kb:65536");
  ca_debug.tcache_no_flush = no_flush;
  holder_t h = {.stream = new_stream()};
  pthread_barrier_init(&h.cached, NULL, 2);
  pthread_barrier_init(&h.done, NULL, 2);
  pthread_t t;
  pthread_create(&t, NULL, cache_then_wait, &h);
  pthread_barrier_wait(&h.cached);
  cr_assert_gt(cached_bytes(), 32 * MiB, "the other thread's cache holds most of it");
  void *big = NULL;
  capture_t c;
  capture_begin(&c);
  CUresult rc = ca_malloc(&big, 40 * MiB, NULL, CA_ALLOC_SYNC, NULL);
  char buf[4096];
  capture_end(&c, buf, sizeof buf);
  if (!rc) cr_assert_eq(ca_free_sync(big), CUDA_SUCCESS);
  pthread_barrier_wait(&h.done);
  pthread_join(t, NULL);
  CHECK_CONSISTENT();
  return rc == CUDA_SUCCESS;
}

Test(core_tcache, out_of_memory_flushes_another_living_threads_cache) {
  cr_assert(big_request_beside_another_threads_cache(false));
}

Test(core_tcache, without_the_flush_another_threads_cache_is_lost) {
  cr_assert_not(big_request_beside_another_threads_cache(true));
}

/* With the default tracking (a stack per call site), a hit takes only a
 * block last handed out at the same call site: a loop reuses its blocks,
 * another call site does not get them, and the per-site live totals (which
 * the checker compares with the statistics) stay right either way. */
static void *pair_in_a_loop(ca_stream_t s) {
  void *p = NULL;
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(cudalloc_malloc(&p, SMALL, (cudaStream_t)s), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
  }
  return p;
}

Test(core_tcache, with_stacks_a_hit_keeps_its_call_site) {
  core_start("sim_events:auto");
  ca_stream_t a = new_stream();
  uint64_t hits = ca_debug.tcache_hits;
  void *p = pair_in_a_loop(a);
  cr_assert_eq(ca_debug.tcache_hits - hits, 2, "the loop's second and third pairs hit");
  void *q = alloc_on(SMALL, a);
  cr_assert_neq(q, p, "another call site does not get the loop's cached block");
  CHECK_CONSISTENT();
  free_on(q, a);
  CHECK_CONSISTENT();
}

/* A block allocated on A, freed on B into the cache and handed out again
 * on B (a hit) is B's block now: B's kernel writes it, the program
 * cudaFree's it under free_mode:stream (which fences it on the block's
 * stream), then A asks for the size. Before the fix a hit left the block's
 * stream at A, so that cudaFree put it in A's queue, which A reused at once
 * while B's kernel still ran: the oracle counted 1 violation. */
Test(core_tcache, a_hit_hands_the_block_out_for_its_new_stream) {
  core_start("track:caller,sim_events:manual,free_mode:stream");
  ca_stream_t a = new_stream(), b = new_stream();
  void *p = alloc_on(SMALL, a);
  free_on(p, b);
  uint64_t hits = ca_debug.tcache_hits;
  cr_assert_eq(alloc_on(SMALL, b), p, "B gets its cached block back");
  cr_assert_eq(ca_debug.tcache_hits - hits, 1, "from the front cache");
  TOUCH(b, p, SMALL, true);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  void *q = alloc_on(SMALL, a);
  cr_assert_eq(ca_sim_oracle_violations(), 0, "A did not get p while B's kernel writes it");
  free_on(q, a);
  CHECK_CONSISTENT();
}

/* The hit comes before the core's device checks, so it makes them itself:
 * an explicit device (cudalloc_torch_malloc's call) is served from the
 * cache of its own stream, and a stream of another device is still refused
 * with a block of the size cached on it. Input tried: device 0 with device
 * 1's stream, then device 1 with it. */
Test(core_tcache, an_explicit_device_hits_only_with_its_own_stream) {
  core_start("track:caller,sim_events:auto,sim_devices:2");
  ca_stream_t s1 = stream_of_device_1();
  void *p = NULL, *q = NULL;
  cr_assert_eq(ca_malloc_on(1, &p, SMALL, s1, CA_ALLOC_ASYNC, NULL), CUDA_SUCCESS);
  cr_assert_eq(ca_free(p, s1), CUDA_SUCCESS);
  uint64_t hits = ca_debug.tcache_hits;
  cr_assert_eq(ca_malloc_on(0, &q, SMALL, s1, CA_ALLOC_ASYNC, NULL), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_null(q);
  cr_assert_eq(ca_debug.tcache_hits, hits, "no hit for the wrong device");
  cr_assert_eq(ca_malloc_on(1, &q, SMALL, s1, CA_ALLOC_ASYNC, NULL), CUDA_SUCCESS);
  cr_assert_eq(q, p, "its own device's request gets the cached block");
  cr_assert_eq(ca_debug.tcache_hits - hits, 1);
  cr_assert_eq(ca_free(q, s1), CUDA_SUCCESS);
  CHECK_CONSISTENT();
}

/* Two allocating call sites (track:caller: each call's return address). */
__attribute__((noinline)) static void *alloc_at_a(ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, SMALL, (cudaStream_t)s), cudaSuccess);
  __asm__ volatile("" ::: "memory");
  return p;
}

__attribute__((noinline)) static void *alloc_at_b(ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, SMALL, (cudaStream_t)s), cudaSuccess);
  __asm__ volatile("" ::: "memory");
  return p;
}

/* Blocks cached from a call site that does not come back: with a 64 KiB
 * cap, 16 blocks of 4 KiB allocated at A and freed fill the cache; then
 * pairs at B miss (another site) and the cap refuses their frees. Once
 * the refusals add up to the cap a trim marks A's blocks, at the next one
 * they go back to the core, and B's frees are cached again. Returns B's
 * hits in 64 pairs. */
static uint64_t hits_after_a_site_that_does_not_come_back(bool no_trim) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:64");
  ca_debug.tcache_no_trim = no_trim;
  ca_stream_t s = new_stream();
  void *a[16];
  for (int i = 0; i < 16; i++) a[i] = alloc_at_a(s);
  for (int i = 0; i < 16; i++) free_on(a[i], s);
  cr_assert_eq(cached_bytes(), 16 * SMALL, "A's blocks fill the cache");
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < 64; i++) free_on(alloc_at_b(s), s);
  hits = ca_debug.tcache_hits - hits;
  CHECK_CONSISTENT();
  return hits;
}

Test(core_tcache, blocks_nobody_takes_are_trimmed) {
  uint64_t hits = hits_after_a_site_that_does_not_come_back(false);
  cr_assert_gt(hits, 16, "B's pairs hit once A's blocks were trimmed (%lu hits)", (unsigned long)hits);
  cr_assert_leq(cached_bytes(), SMALL, "only B's block is cached");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(core_tcache, without_the_trim_the_cache_stays_full_of_them) {
  cr_assert_eq(hits_after_a_site_that_does_not_come_back(true), 0, "no B pair hits");
  cr_assert_eq(cached_bytes(), 16 * SMALL, "A's blocks hold the cache for good");
}

/* The same with a size that does not come back: 16 blocks of 4 KiB fill a
 * 64 KiB cache, then one call site asks for 8 KiB blocks only. Their frees
 * are refused (no room), which weighs a quarter in the trim's pressure:
 * after 64 KiB x 4 of refusals a trim marks the 4 KiB blocks, after as
 * much again they go back, and the 8 KiB pairs hit. Returns their hits in
 * 160 pairs. */
static uint64_t hits_after_a_size_that_does_not_come_back(bool no_trim) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:64");
  ca_debug.tcache_no_trim = no_trim;
  ca_stream_t s = new_stream();
  void *a[16];
  for (int i = 0; i < 16; i++) a[i] = alloc_on(SMALL, s);
  for (int i = 0; i < 16; i++) free_on(a[i], s);
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < 160; i++) free_on(alloc_on(2 * SMALL, s), s);
  hits = ca_debug.tcache_hits - hits;
  CHECK_CONSISTENT();
  return hits;
}

Test(core_tcache, blocks_of_a_size_nobody_asks_for_are_trimmed) {
  uint64_t hits = hits_after_a_size_that_does_not_come_back(false);
  cr_assert_gt(hits, 16, "the 8 KiB pairs hit once the 4 KiB blocks were trimmed (%lu hits)", (unsigned long)hits);
  cr_assert_leq(cached_bytes(), 2 * SMALL);
}

Test(core_tcache, without_the_trim_a_size_nobody_asks_for_holds_the_cache) {
  cr_assert_eq(hits_after_a_size_that_does_not_come_back(true), 0);
  cr_assert_eq(cached_bytes(), 16 * SMALL);
}

/* The program holds p from stream s, then destroys s: p's free on s is
 * refused like any bad handle (p stays the program's), not taken into the
 * cache because the thread remembered s's device from before (tcache.c's
 * stream_device, which stale_stream_devices breaks). Returns whether the
 * free was refused. With the thread's memory of s believed through the
 * destruction, the free went into the cache and returned success. */
static bool free_on_a_destroyed_stream_is_refused(bool stale) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t s = new_stream();
  free_on(alloc_on(SMALL, s), s);   /* s's device asked, and remembered */
  void *p = alloc_on(SMALL, s);
  ca_debug.stale_stream_devices = stale;
  ca_stream_destroyed(s);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);
  cudaError_t rc = cudalloc_free(p, (cudaStream_t)s);
  ca_debug.stale_stream_devices = false;
  if (rc != cudaSuccess) cr_assert_eq(cudalloc_free_sync(p), cudaSuccess, "still the program's");
  return rc == cudaErrorInvalidResourceHandle;
}

Test(core_tcache, a_free_on_a_destroyed_stream_is_refused) { cr_assert(free_on_a_destroyed_stream_is_refused(false)); }

Test(core_tcache, stale_stream_devices_are_caught_by_the_destroyed_stream_free) {
  cr_assert_not(free_on_a_destroyed_stream_is_refused(true), "the broken memory let the free in");
}

/* A free into the cache looks at the struct it remembers for the pointer
 * (held_block) and, to own it, marks it first (ca_tcache_give's compare
 * and swap), then sees whether it still is the block at the pointer. The
 * struct may have moved on: the thread freed p through the core, the
 * struct lived on as a split's rest (pool.c's cut: the rest keeps its
 * struct) and came back to the thread whole at another address, while
 * the block at p now came through a path that remembers nothing
 * (cudaMalloc). A stream-ordered free of p then marks that other block
 * for an instant, and a core free of it by another thread in that instant
 * found it "cached" and refused it as a double free (a legitimate free
 * lost, the block leaked). Here thread U frees the other block once while
 * this thread keeps freeing p into its cache; rounds until U's free lands
 * in the instant. Before the fix (main b565e65) U's free failed in the
 * first rounds tried, every run: cudaErrorInvalidValue, logged as "free of
 * ... rejected: it is inside a live block (an interior pointer)", and the
 * block stayed live. */
typedef struct {
  void *z;
  int go, done;
  cudaError_t rc;
} racer_t;

static void *free_other(void *arg) {
  racer_t *r = arg;
  while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE)) {
  }
  r->rc = cudalloc_free_sync(r->z);
  __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
  return NULL;
}

#define RACE_ROUNDS 400

Test(core_tcache, a_core_free_is_not_refused_while_a_cached_free_looks_at_its_struct, .init = cr_redirect_stderr) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:1024");
  ca_stream_t s = new_stream();
  int refused = 0, rounds = 0, tried = 0;
  for (; rounds < RACE_ROUNDS && !refused; rounds++) {
    void *p0 = NULL, *p = NULL, *p1 = NULL, *y = NULL, *z = NULL;
    cr_assert_eq(ca_malloc(&p0, 8192, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
    p = alloc_on(8192, s);   /* remembered by this thread: (p, X) */
    cr_assert_eq(ca_malloc(&p1, 8192, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
    cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);   /* the core's free: X waits, then is free at p */
    cudalloc_step();
    ca_sim_complete_all();
    seal_and_poll();
    cr_assert_eq(ca_malloc(&y, 4096, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);   /* p's front: a new struct */
    z = alloc_on(4096, s);   /* X, the rest, whole: the thread's again at p + 4096 */
    bool layout = y == p && (char *)z == (char *)p + 4096;
    if (layout) {
      tried++;
      racer_t r = {.z = z};
      pthread_t t;
      pthread_create(&t, NULL, free_other, &r);
      __atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
      while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) cr_assert_not(ca_tcache_give(y, s), "y is not the thread's");
      pthread_join(t, NULL);
      if (r.rc != cudaSuccess) {
        refused++;
        cr_assert_eq(cudalloc_free_sync(z), cudaSuccess, "z was still live");
      }
    } else {
      cr_assert_eq(cudalloc_free_sync(z), cudaSuccess);
    }
    cr_assert_eq(cudalloc_free_sync(y), cudaSuccess);
    cr_assert_eq(cudalloc_free_sync(p0), cudaSuccess);
    cr_assert_eq(cudalloc_free_sync(p1), cudaSuccess);
  }
  cr_assert_gt(tried, 0, "the layout came about");
  cr_assert_eq(refused, 0, "a core free of the thread's block was refused as a double free (round %d of %d tried)",
               rounds, tried);
  CHECK_CONSISTENT();
}

/* What a thread may cache is thread_cache_kb for each of its streams'
 * lists that hold blocks, up to thread_cache_streams of them
 * (tcache_layout.h small_room): a block freed on a stream serves only that
 * stream, so streams sharing one thread_cache_kb keep a few blocks each.
 * Here 64 KiB, and 64 KiB freed on each of two streams: all of it is
 * cached. With thread_cache_streams:1 (one thread_cache_kb for the
 * thread), the second stream's frees are refused. */
static int64_t cached_after_two_streams_free_a_cap_each(bool one_cap) {
  core_start(one_cap ? "track:caller,sim_events:auto,thread_cache_kb:64,thread_cache_streams:1"
                     : "track:caller,sim_events:auto,thread_cache_kb:64");
  ca_stream_t s[2] = {new_stream(), new_stream()};
  void *p[2][16];
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 16; i++) p[k][i] = alloc_on(SMALL, s[k]);
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < 16; i++) free_on(p[k][i], s[k]);
  int64_t cached = cached_bytes();
  CHECK_CONSISTENT();
  return cached;
}

Test(core_tcache, each_stream_with_cached_blocks_adds_a_cap) {
  cr_assert_eq(cached_after_two_streams_free_a_cap_each(false), 2 * 16 * SMALL, "both streams' frees are cached");
}

Test(core_tcache, with_one_stream_s_cap_for_the_thread_the_second_stream_is_refused) {
  cr_assert_eq(cached_after_two_streams_free_a_cap_each(true), 16 * SMALL, "only the first stream's frees are cached");
}

/* The blocks a thread holds are remembered by address in two ways: way 0
 * indexed by the address itself (neighbours share lines), way 1 by a hash
 * (tcache.c held_slot). a and b, 1 MiB apart, meet in way 0; both are held
 * at once, and both frees go into the cache. With way 0 alone
 * (tcache_held_one_way) b's entry takes a's, and a's free is the core's. */
static int held_one_mib_apart_and_cached(bool one_way) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:4096");
  ca_debug.tcache_held_one_way = one_way;
  ca_stream_t s = new_stream();
  void *a = alloc_on(SMALL, s), *filler = NULL;
  /* not stream-ordered: the thread remembers nothing of it */
  cr_assert_eq(ca_malloc(&filler, MiB - SMALL, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
  void *b = alloc_on(SMALL, s);
  cr_assert_eq((uintptr_t)b - (uintptr_t)a, MiB, "the small pool cut a, the filler and b in a row");
  int cached = 0;
  for (int i = 0; i < 2; i++) {
    void *p = i ? b : a;
    if (ca_tcache_give(p, s)) cached++;
    else free_on(p, s);   /* the core's free: nothing is left live */
  }
  ca_debug.tcache_held_one_way = false;
  cr_assert_eq(cudalloc_free_sync(filler), cudaSuccess);
  CHECK_CONSISTENT();
  return cached;
}

Test(core_tcache, blocks_that_meet_in_the_first_way_are_both_remembered) {
  cr_assert_eq(held_one_mib_apart_and_cached(false), 2, "both frees went into the cache");
}

Test(core_tcache, with_one_way_the_newer_block_takes_the_older_ones_entry) {
  cr_assert_eq(held_one_mib_apart_and_cached(true), 1, "only b's free went into the cache");
}

/* A hit keeps its block's entry among the blocks the thread holds
 * (tcache.c rehold_block: no hash) only while that entry is still the
 * block's: once cached, the entry is stale, and a newer block may take
 * its slot; the hit then enters the block anew, so that its free is
 * still the cache's. Here x is the first block remembered, and 8192
 * blocks held at once (twice the entries of the table's two ways) take
 * x's entry after x is cached (the twin test shows it taken). */
#define HELD_AT_ONCE 8192
static bool a_hit_whose_slot_was_taken_is_freed_into_the_cache(bool trust_slot) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:64,thread_cache_kb:65536");
  ca_debug.tcache_trust_slot = trust_slot;
  ca_stream_t s = new_stream();
  static void *held[HELD_AT_ONCE + 1];
  /* the memory first, through a path that remembers nothing: a growth
   * later would flush the thread's cache (x) before it grows */
  for (int i = 0; i <= HELD_AT_ONCE; i++)
    cr_assert_eq(ca_malloc(&held[i], 1024, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
  for (int i = 0; i <= HELD_AT_ONCE; i++) cr_assert_eq(cudalloc_free_sync(held[i]), cudaSuccess);
  cudalloc_step();
  ca_sim_complete_all();
  seal_and_poll();
  void *x = alloc_on(SMALL, s);
  free_on(x, s);
  for (int i = 0; i < HELD_AT_ONCE; i++) held[i] = alloc_on(1024, s);   /* another class: none hits x */
  void *y = alloc_on(SMALL, s);
  cr_assert_eq(y, x, "the hit");
  bool cached = ca_tcache_give(y, s);
  if (!cached) free_on(y, s);
  for (int i = 0; i < HELD_AT_ONCE; i++) free_on(held[i], s);
  ca_debug.tcache_trust_slot = false;
  CHECK_CONSISTENT();
  return cached;
}

Test(core_tcache, a_hit_whose_entry_was_taken_is_remembered_again) {
  cr_assert(a_hit_whose_slot_was_taken_is_freed_into_the_cache(false));
}

Test(core_tcache, a_hit_that_trusts_a_taken_entry_loses_its_cached_free) {
  cr_assert_not(a_hit_whose_slot_was_taken_is_freed_into_the_cache(true), "the broken hit still found its entry");
}

/* A thread without a front cache of its own (here none is ever made:
 * thread_cache_kb:0) has the shared empty one, which its hits and frees
 * look into and nothing writes: each path that would write a cache
 * tests for it first (tcache.c has_cache). The test switch
 * tcache_none_is_a_cache takes that test out: the full hit then asks the
 * stream's device and keeps the answer in the shared one. */
static bool pairs_without_a_cache_leave_the_empty_one_untouched(bool none_is_a_cache) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:0");
  ca_debug.tcache_none_is_a_cache = none_is_a_cache;
  ca_stream_t s = new_stream();
  for (int i = 0; i < 10; i++) free_on(alloc_on(SMALL, s), s);
  ca_debug.tcache_none_is_a_cache = false;
  CHECK_CONSISTENT();
  return ca_tcache_none_untouched();
}

Test(core_tcache, pairs_without_a_cache_write_nothing_into_the_shared_empty_one) {
  cr_assert(pairs_without_a_cache_leave_the_empty_one_untouched(false));
}

Test(core_tcache, a_thread_that_takes_the_empty_cache_for_its_own_writes_into_it) {
  cr_assert_not(pairs_without_a_cache_leave_the_empty_one_untouched(true), "the broken test wrote nothing");
}
