/* The front cache's large blocks (alloc/tcache.c, thread_cache_large_mb):
 * above 64 KiB and up to 8 MiB, 8 size classes per octave, so that a class
 * holds blocks of several sizes and a hit must take one at least as large
 * as the request (or any of the next class). Each guard has a twin test
 * with a test-only switch that breaks it (tcache_ignore_fit,
 * tcache_any_stream, tcache_no_flush, tcache_no_trim). */
#include "tcache_testing.h"

#include <pthread.h>

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's oracle and counters"); }
TestSuite(core_tcache_large, .init = sim_only, .fini = tcache_fini);

#define KiB (1u << 10)
#define SMALL (4 * KiB)
/* (896 KiB, 1 MiB] is one class, (1 MiB, 1.125 MiB] the next. */
#define TOP (1 * MiB)

Test(core_tcache_large, off_by_default) {
  core_start("track:caller,sim_events:auto");
  ca_stream_t s = new_stream();
  free_on(alloc_on(TOP, s), s);
  cr_assert_eq(cached_bytes(), 0, "a 1 MiB block is the core's at once");
}

Test(core_tcache_large, thread_cache_kb_0_turns_them_off_too) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:0,thread_cache_large_mb:16");
  ca_stream_t s = new_stream();
  free_on(alloc_on(TOP, s), s);
  cr_assert_eq(cached_bytes(), 0);
}

/* A 1 MiB block freed on S is taken back on S, by a request of its class
 * that it holds, without the core; not by another stream's request, nor
 * by a request of a class below. */
Test(core_tcache_large, a_large_block_hits_on_its_stream_and_class) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_stream_t s = new_stream(), other = new_stream();
  void *p = alloc_on(TOP, s);
  free_on(p, s);
  cr_assert_eq(cached_bytes(), (int64_t)TOP);
  int64_t core = dev0()->stats.num_allocs.total;
  uint64_t hits = ca_debug.tcache_hits;
  cr_assert_eq(alloc_on(1000 * KiB, s), p, "1000 KiB: the same class, and the block holds it");
  cr_assert_eq(ca_debug.tcache_hits - hits, 1);
  cr_assert_eq(dev0()->stats.num_allocs.total, core, "the core served nothing");
  free_on(p, s);
  /* (the core may grow for them, and its slow path give p back first) */
  alloc_on(TOP, other);
  alloc_on(TOP / 2, s);
  cr_assert_eq(ca_debug.tcache_hits - hits, 1, "neither another stream's request nor a 512 KiB one hit");
  CHECK_CONSISTENT();
}

/* The next class up holds only blocks larger than the request: the hit
 * takes one when its own class has none. Two classes up is a miss. */
Test(core_tcache_large, a_hit_takes_a_block_of_the_next_class) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_stream_t s = new_stream();
  void *p = alloc_on(TOP + 128 * KiB, s), *q = alloc_on(TOP + 256 * KiB, s);
  free_on(p, s);
  free_on(q, s);
  cr_assert_eq(alloc_on(TOP, s), p, "1.125 MiB: the next class");
  cr_assert_neq(alloc_on(TOP, s), q, "1.25 MiB is two classes up");
  CHECK_CONSISTENT();
}

/* A 1000 KiB block cached, then a 1 MiB request of the same class: it
 * must not get the smaller block. Returns whether it did (the checker
 * judges what it got). */
static bool a_larger_request_gets_the_smaller_block(bool ignore_fit) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_debug.tcache_ignore_fit = ignore_fit;
  ca_stream_t s = new_stream();
  void *p = alloc_on(1000 * KiB, s);
  free_on(p, s);
  void *q = alloc_on(TOP, s);
  if (q != p) {
    cr_assert_geq(block_size(q), TOP);
    CHECK_CONSISTENT();
  }
  return q == p;
}

Test(core_tcache_large, a_larger_request_never_gets_a_smaller_block_of_its_class) {
  cr_assert_not(a_larger_request_gets_the_smaller_block(false));
}

Test(core_tcache_large, a_hit_ignoring_the_fit_is_caught_by_the_checker, .init = cr_redirect_stderr) {
  cr_assert(a_larger_request_gets_the_smaller_block(true), "the switch did not plant the bad hit");
  cr_assert_eq(cudalloc_check(), CA_CHECK_SIZE, "a 1000 KiB block serving 1 MiB");
  cr_assert(strstr(captured_stderr(), "serves a request of 1048576"), "%s", captured_stderr());
  ca_debug.tcache_ignore_fit = false;
}

/* A hit hands the block out for the program's request: the range and the
 * requested bytes say 1000 KiB, the allocated bytes the block's 1 MiB. */
Test(core_tcache_large, a_large_hit_keeps_the_programs_request) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_stream_t s = new_stream();
  void *p = alloc_on(TOP, s);
  free_on(p, s);
  cr_assert_eq(alloc_on(1000 * KiB, s), p);
  size_t size = 0;
  cr_assert_eq(cudalloc_get_address_range(p, NULL, &size), cudaSuccess);
  cr_assert_eq(size, 1000 * KiB);
  cudalloc_stats_t st = stats0();
  cr_assert_eq(st.requested_bytes.current, (int64_t)(1000 * KiB));
  cr_assert_eq(st.allocated_bytes.current, (int64_t)TOP);
  CHECK_CONSISTENT();
  free_on(p, s);
  st = stats0();
  cr_assert_eq(st.requested_bytes.current, 0);
  cr_assert_eq(st.allocated_bytes.current, 0);
  CHECK_CONSISTENT();
}

/* Four 1 MiB blocks freed under a 2 MiB cap: two are cached; the small
 * blocks have their own cap beside it. */
Test(core_tcache_large, the_large_cap_holds_beside_the_small_one) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:64,thread_cache_large_mb:2");
  ca_stream_t s = new_stream();
  void *p[4], *q[16];
  for (int i = 0; i < 4; i++) p[i] = alloc_on(TOP, s);
  for (int i = 0; i < 16; i++) q[i] = alloc_on(SMALL, s);
  for (int i = 0; i < 4; i++) free_on(p[i], s);
  cr_assert_eq(cached_bytes(), (int64_t)(2 * MiB), "two of the four");
  for (int i = 0; i < 16; i++) free_on(q[i], s);
  cr_assert_eq(cached_bytes(), (int64_t)(2 * MiB + 64 * KiB), "and the small blocks' 64 KiB");
  cr_assert_eq(stats0().allocated_bytes.current, 0, "all are freed");
  CHECK_CONSISTENT();
}

/* A device of 32 MiB: three 8 MiB blocks and 16 small ones cached, then a
 * 24 MiB cudaMalloc, which fits only with the large ones back. Returns
 * whether it succeeded. */
static bool big_request_after_caching_large(bool no_flush) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:32,thread_cache_large_mb:64");
  ca_debug.tcache_no_flush = no_flush;
  ca_stream_t s = new_stream();
  void *p[3], *q[16];
  for (int i = 0; i < 3; i++) p[i] = alloc_on(8 * MiB, s);
  for (int i = 0; i < 16; i++) q[i] = alloc_on(SMALL, s);
  for (int i = 0; i < 3; i++) free_on(p[i], s);
  for (int i = 0; i < 16; i++) free_on(q[i], s);
  cr_assert_eq(cached_bytes(), (int64_t)(24 * MiB + 16 * SMALL));
  return sync_request_succeeds(24 * MiB);
}

/* The slow path gives the thread's large blocks back first, and keeps its
 * small lists when that was enough: they did not hold what it needed, and
 * the program reuses them (before, every slow path of bench_alloc's
 * GPU-like sequence emptied them and the small hits fell by a third). */
Test(core_tcache_large, the_slow_path_gives_large_blocks_back_before_it_fails) {
  cr_assert(big_request_after_caching_large(false));
  cr_assert_eq(cached_bytes(), (int64_t)(16 * SMALL), "the large blocks went back, the small ones stayed");
  cr_assert_eq(stats0().num_ooms.total, 0);
}

Test(core_tcache_large, without_the_flush_the_large_cached_bytes_are_lost) {
  cr_assert_not(big_request_after_caching_large(true), "the cached 24 MiB would have been missing");
}

/* After that slow path the thread keeps at most half of what it held (12
 * MiB): of three 8 MiB blocks freed again, one is cached. */
Test(core_tcache_large, after_a_slow_path_the_thread_keeps_fewer_large_blocks) {
  cr_assert(big_request_after_caching_large(false));
  ca_stream_t s = new_stream();
  void *p[3];
  for (int i = 0; i < 3; i++) p[i] = alloc_on(8 * MiB, s);
  for (int i = 0; i < 3; i++) free_on(p[i], s);
  cr_assert_eq(cached_bytes(), (int64_t)(8 * MiB + 16 * SMALL), "the room was halved to 12 MiB");
  CHECK_CONSISTENT();
}

#define ANOTHER_STREAM(break_guard) \
  another_stream_gets_the_cached_block("track:caller,sim_events:manual,thread_cache_large_mb:16", TOP, break_guard)

Test(core_tcache_large, a_large_cached_block_is_never_handed_to_another_stream) {
  cr_assert_not(ANOTHER_STREAM(false));
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(core_tcache_large, a_large_hit_on_another_stream_is_caught_by_the_oracle, .init = cr_redirect_stderr) {
  cr_assert(ANOTHER_STREAM(true), "the switch did not plant the reuse");
  cr_assert_eq(ca_sim_oracle_violations(), 1, "the oracle judged the hit's hand-out");
  ca_sim_oracle_reset();
}

Test(core_tcache_large, destroying_the_stream_gives_its_large_blocks_back) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_stream_t s = new_stream();
  free_on(alloc_on(TOP, s), s);
  free_on(alloc_on(SMALL, s), s);
  cr_assert_eq(dev0()->live.count, 2, "the cached blocks are live to the core");
  ca_stream_destroyed(s);
  cr_assert_eq(dev0()->live.count, 0);
  cr_assert_eq(cached_bytes(), 0);
  CHECK_CONSISTENT();
}

/* A 1 MiB block fills a 1 MiB cap; then only 512 KiB pairs come, whose
 * frees the cap refuses (a quarter of their size each in the large trim's
 * pressure): after 1 MiB x 4 of them a trim marks the 1 MiB block, after
 * as much again it goes back, and the 512 KiB pairs hit. 16 small blocks
 * cached beside stay: the small lists are trimmed on their own pressure
 * alone. Returns the hits in 64 pairs. */
static uint64_t hits_after_a_large_size_nobody_asks_for(bool no_trim) {
  core_start("track:caller,sim_events:auto,thread_cache_kb:64,thread_cache_large_mb:1");
  ca_debug.tcache_no_trim = no_trim;
  ca_stream_t s = new_stream();
  void *q[16];
  for (int i = 0; i < 16; i++) q[i] = alloc_on(SMALL, s);
  for (int i = 0; i < 16; i++) free_on(q[i], s);
  free_on(alloc_on(TOP, s), s);
  cr_assert_eq(cached_bytes(), (int64_t)(TOP + 64 * KiB));
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < 64; i++) free_on(alloc_on(TOP / 2, s), s);
  hits = ca_debug.tcache_hits - hits;
  CHECK_CONSISTENT();
  return hits;
}

Test(core_tcache_large, large_blocks_of_a_size_nobody_asks_for_are_trimmed) {
  uint64_t hits = hits_after_a_large_size_nobody_asks_for(false);
  cr_assert_gt(hits, 32, "the 512 KiB pairs hit once the 1 MiB block was trimmed (%lu hits)", (unsigned long)hits);
  cr_assert_eq(cached_bytes(), (int64_t)(TOP / 2 + 64 * KiB), "a 512 KiB block, and the small ones still");
}

Test(core_tcache_large, without_the_trim_the_large_size_holds_the_cap) {
  cr_assert_eq(hits_after_a_large_size_nobody_asks_for(true), 0);
  cr_assert_eq(cached_bytes(), (int64_t)(TOP + 64 * KiB));
}

/* Two threads make large pairs on their own streams while this one
 * flushes every cache again and again (cudalloc_empty_cache): what each
 * thread caches goes back under its feet; at the end nothing is allocated
 * and the invariants hold (under TSan: no race between a thread's hits
 * and the flushes). */
static void *large_pairs(void *arg) {
  ca_state.be->set_device(0);
  for (int i = 0; i < 2000; i++) {
    void *p = NULL;
    size_t size = (size_t)(128 + 64 * (i % 29)) * KiB;
    if (cudalloc_malloc(&p, size, (cudaStream_t)arg) != cudaSuccess) return arg;
    if (cudalloc_free(p, (cudaStream_t)arg) != cudaSuccess) return arg;
  }
  return NULL;
}

Test(core_tcache_large, threads_keep_caching_while_another_flushes) {
  core_start("track:caller,sim_events:auto,thread_cache_large_mb:16");
  ca_stream_t s[2] = {new_stream(), new_stream()};
  pthread_t t[2];
  uint64_t hits = ca_debug.tcache_hits;
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, large_pairs, s[i]);
  for (int i = 0; i < 50; i++) cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  for (int i = 0; i < 2; i++) {
    void *failed = NULL;
    pthread_join(t[i], &failed);
    cr_assert_null(failed, "a pair failed on thread %d", i);
  }
  cr_assert_gt(ca_debug.tcache_hits - hits, 0, "the threads' pairs hit");
  cudalloc_stats_t st = stats0();
  cr_assert_eq(st.allocated_bytes.current, 0);
  cr_assert_eq(st.num_allocs.total, st.num_frees.total);
  CHECK_CONSISTENT();
}

/* cudaMemGetInfo counts what cudalloc could give back: cached large blocks
 * are freed memory, so after freeing 24 MiB into the cache the free bytes
 * are what they were before the allocation (with tcache_no_flush the
 * blocks stay LIVE in the core and 24 MiB are missing). Returns the free
 * bytes lost. */
static size_t mem_info_loss_with_large_blocks_cached(bool no_flush) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:64,thread_cache_large_mb:64");
  ca_debug.tcache_no_flush = no_flush;
  ca_stream_t s = new_stream();
  size_t before, after, total;
  cr_assert_eq(ca_mem_get_info(0, &before, &total), CUDA_SUCCESS);
  void *p[3];
  for (int i = 0; i < 3; i++) p[i] = alloc_on(8 * MiB, s);
  for (int i = 0; i < 3; i++) free_on(p[i], s);
  cr_assert_eq(cached_bytes(), (int64_t)(24 * MiB));
  cr_assert_eq(ca_mem_get_info(0, &after, &total), CUDA_SUCCESS);
  CHECK_CONSISTENT();
  return before > after ? before - after : 0;
}

Test(core_tcache_large, mem_get_info_counts_large_cached_blocks_as_free) {
  cr_assert_eq(mem_info_loss_with_large_blocks_cached(false), 0);
  cr_assert_eq(cached_bytes(), 0, "the query gave them back");
}

Test(core_tcache_large, without_the_flush_mem_get_info_misses_them) {
  cr_assert_geq(mem_info_loss_with_large_blocks_cached(true), 24 * MiB);
}

/* Bytes the front caches hold on device dev. */
static int64_t cached_on(int dev) {
  cudalloc_stats_t st;
  cr_assert_eq(cudalloc_get_stats(dev, &st), cudaSuccess);
  return ca_state.devices[dev]->stats.allocated_bytes.current - st.allocated_bytes.current;
}

/* The slow path's first flush is about the device short of memory: large
 * blocks the thread caches on ANOTHER device took none of it, so they
 * neither halve the thread's large room nor keep this device's small
 * lists from going back (as for a thread holding no large block). Input
 * tried: an 8 MiB block cached on device 1, 16 small ones on device 0,
 * then a cudaMalloc on device 0 that grows (a slow path). Before the fix
 * (ca_tcache_flush_mine tested c->bytes[1], every device's large bytes)
 * the small blocks stayed cached on device 0, and a second 8 MiB free on
 * device 1 was refused: the room had been halved to 4 MiB (each of the
 * two assertions failed on its own). */
Test(core_tcache_large, another_devices_large_blocks_leave_this_devices_slow_path_alone) {
  core_start("track:caller,sim_events:auto,sim_devices:2,thread_cache_large_mb:64");
  ca_stream_t s1 = stream_of_device_1(), s0 = new_stream();
  void *p = NULL, *p2 = NULL, *q[16];
  cr_assert_eq(ca_malloc_on(1, &p, 8 * MiB, s1, CA_ALLOC_ASYNC, NULL), CUDA_SUCCESS);
  cr_assert_eq(ca_malloc_on(1, &p2, 8 * MiB, s1, CA_ALLOC_ASYNC, NULL), CUDA_SUCCESS);
  cr_assert_eq(ca_free(p, s1), CUDA_SUCCESS);
  cr_assert_eq(cached_on(1), (int64_t)(8 * MiB));
  for (int i = 0; i < 16; i++) q[i] = alloc_on(SMALL, s0);
  for (int i = 0; i < 16; i++) free_on(q[i], s0);
  cr_assert_eq(cached_on(0), (int64_t)(16 * SMALL));
  void *big = NULL;
  cr_assert_eq(ca_malloc(&big, 16 * MiB, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS, "device 0 grows: a slow path");
  cr_assert_eq(cached_on(0), 0, "device 0's small blocks went back, as with no large block anywhere");
  cr_assert_eq(cached_on(1), (int64_t)(8 * MiB), "device 1's block is not device 0's business");
  cr_assert_eq(ca_free(p2, s1), CUDA_SUCCESS);
  cr_assert_eq(cached_on(1), (int64_t)(16 * MiB), "the large room was not halved");
  cr_assert_eq(ca_free_sync(big), CUDA_SUCCESS);
  CHECK_CONSISTENT();
}

/* A block in each of a scattered set of size classes, small and large,
 * among runs of empty ones that a flush passes eight at a time
 * (tcache_flush.c next_class): by runs of eight classes in turn, the first one
 * alone, the last one alone, none, the fourth and sixth; and 127, 128 and
 * 183, the edges of the two kinds. Destroying the stream gives every one
 * back; a pass that skipped a class would leave its block cached. */
static bool scattered_class(unsigned c) {
  unsigned at = c % 8, run = c / 8 % 4;
  return c == 127 || c == 128 || c == 183 || (run == 0 && at == 0) || (run == 1 && at == 7) ||
         (run == 3 && (at == 3 || at == 5));
}
#define SMALL_CLASSES 128u   /* (c + 1) * 512 bytes each */
#define ALL_CLASSES (SMALL_CLASSES + 56u)
static size_t size_of_class(unsigned c) {
  if (c < SMALL_CLASSES) return (size_t)(c + 1) * 512;
  unsigned k = 16 + (c - SMALL_CLASSES) / 8, j = (c - SMALL_CLASSES) % 8;   /* octave 2^k, its j-th eighth */
  return ((size_t)1 << k) + ((size_t)j << (k - 3)) + 512;
}

Test(core_tcache_large, a_flush_reaches_a_block_in_any_class) {
  core_start("track:caller,sim_events:auto,sim_capacity_mb:1024,thread_cache_kb:16384,thread_cache_large_mb:512");
  ca_stream_t s = new_stream();
  void *p[ALL_CLASSES] = {0};
  int64_t bytes = 0;
  for (unsigned c = 0; c < ALL_CLASSES; c++)
    if (scattered_class(c)) p[c] = alloc_on(size_of_class(c), s), bytes += (int64_t)size_of_class(c);
  for (unsigned c = 0; c < ALL_CLASSES; c++)
    if (p[c]) free_on(p[c], s);
  cr_assert_eq(cached_bytes(), bytes, "every block went into the cache");
  ca_stream_destroyed(s);
  cr_assert_eq(cached_bytes(), 0, "and every one came back");
  cr_assert_eq(dev0()->live.count, 0);
  CHECK_CONSISTENT();
}
