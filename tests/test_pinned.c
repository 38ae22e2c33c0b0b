/* The pinned host-memory cache on the simulated device: a private jemalloc
 * arena over pinned chunks (alloc/pinned*.c). Steady state without backend
 * calls, reuse, jemalloc's own statistics against cudalloc's, the cache
 * limit, chunk boundaries, async copies in flight, bad input. */
#include "core_testing.h"
#include "stderr_capture.h"

#include <pthread.h>
#include <unistd.h>

#include "jemalloc_private.h"
#include "pinned.h"

static void sim_only(void) { SKIP_ON_CUDA("pinned counters of the simulated device"); }
/* Tests that leave pinned blocks live get them reported as leaks at
 * shutdown: expected, and kept out of make test's output. */
static void shutdown_quietly(void) {
  capture_t cap;
  char ignored[16384];
  capture_begin(&cap);
  cudalloc_shutdown();
  capture_end(&cap, ignored, sizeof ignored);
}

TestSuite(pinned, .init = sim_only, .fini = shutdown_quietly);

static cudalloc_pinned_stats_t pstats(void) {
  cudalloc_pinned_stats_t s;
  cr_assert_eq(cudalloc_get_pinned_stats(&s), cudaSuccess);
  return s;
}

static void *host_alloc(size_t size) {
  void *p = NULL;
  cr_assert_eq(ca_host_alloc(&p, size, 0, NULL), CUDA_SUCCESS, "pinned allocation of %zu bytes", size);
  cr_assert_not_null(p);
  return p;
}

static uint64_t host_allocs(void) { return ca_sim_calls(CA_OP_host_alloc); }

// ----------------------------------------------------------------------------
// Many blocks of mixed sizes
// ----------------------------------------------------------------------------

#define NBLOCKS 2000
#define MAX_WARMUP 40
#define QUIET 6
#define ROUNDS 24

/* 64 B to 1 MiB, skewed to small sizes as data loaders' buffers are. */
static size_t mixed_size(uint64_t *rng) {
  uint64_t r = rng_next(rng);
  return (size_t)(64u << (r % 15)) + (size_t)(r >> 40) % 4096;
}

/* One round: NBLOCKS live at once, each filled with its own cookie and
 * checked before it is freed (two blocks that overlap are caught). The
 * sizes are the same every round, the order of the frees is not. */
static void round_trip(uint64_t seed, size_t *addr_hits, void **seen, size_t nseen) {
  static void *p[NBLOCKS];
  static size_t size[NBLOCKS];
  uint64_t sizes = 42, order = seed;
  for (int i = 0; i < NBLOCKS; i++) {
    size[i] = mixed_size(&sizes);
    p[i] = host_alloc(size[i]);
    memset(p[i], (unsigned char)i, size[i] < 256 ? size[i] : 256);
    for (size_t k = 0; addr_hits && k < nseen; k++)
      if (seen[k] == p[i]) { (*addr_hits)++; break; }
  }
  for (int i = NBLOCKS - 1; i > 0; i--) {
    int j = (int)(rng_next(&order) % (uint64_t)(i + 1));
    void *tp = p[i]; p[i] = p[j]; p[j] = tp;
    size_t ts = size[i]; size[i] = size[j]; size[j] = ts;
  }
  for (int i = 0; i < NBLOCKS; i++) {
    unsigned char *b = p[i];
    for (size_t k = 1; k < (size[i] < 256 ? size[i] : 256); k++)
      cr_assert_eq(b[k], b[0], "block %p was overwritten by another", p[i]);
    if (seen && (size_t)i < nseen) seen[i] = p[i];
    cr_assert_eq(ca_host_free(p[i]), CUDA_SUCCESS);
  }
}

Test(pinned, thousands_of_mixed_sizes_reach_a_steady_state_without_backend_calls) {
  core_start("sim_pinned_mb:4096,pinned_cache_mb:4096");
  static void *seen[NBLOCKS];
  /* warm-up: the frees' order changes every round, and jemalloc's extents
   * settle after a few, how many depends on where the chunks land (seen: a
   * last chunk in round 6, after three quiet rounds, then none in 60):
   * until QUIET rounds in a row pin nothing */
  uint64_t r = 1, quiet = 0;
  for (; quiet < QUIET && r <= MAX_WARMUP; r++) {
    uint64_t before = host_allocs();
    round_trip(r, NULL, NULL, 0);
    quiet = host_allocs() == before ? quiet + 1 : 0;
  }
  cr_assert_eq(quiet, QUIET, "still pinning new chunks after %d rounds", MAX_WARMUP);
  round_trip(r++, NULL, seen, NBLOCKS);
  uint64_t calls = host_allocs();
  int64_t reserved = pstats().pinned_reserved_bytes.current;
  size_t hits = 0;
  uint64_t last = r + ROUNDS;
  for (; r < last; r++) round_trip(r, hits ? NULL : &hits, hits ? NULL : seen, NBLOCKS);
  /* None at all: the arena never decays (pinned.c), so once warm it
   * reuses its own dirty extents for any order of frees. (With jemalloc's
   * default decay, extents went back on a timer and 1 to 4 more chunks
   * were pinned in 60 rounds, at unforeseeable times.) */
  uint64_t more = host_allocs() - calls;
  cr_assert_eq(more, 0, "after warm-up: %lu more chunks pinned in %d rounds", (unsigned long)more, ROUNDS);
  cr_assert_eq(pstats().pinned_reserved_bytes.current, reserved);
  cr_assert_gt(hits, NBLOCKS / 2, "freed memory is handed out again (%zu of %d addresses seen again)", hits, NBLOCKS);
  cudalloc_pinned_stats_t s = pstats();
  cr_assert_eq(s.pinned_num_allocs.total, (int64_t)(r - 1) * NBLOCKS);
  cr_assert_lt(s.pinned_reserved_bytes.peak, 2 * s.pinned_requested_bytes.peak, "no runaway growth");
  cr_assert_eq(s.pinned_num_live_blocks.current, 0);
  cr_assert_eq(s.pinned_allocated_bytes.current, 0);
  cr_assert_eq(s.pinned_backend_alloc.total, (int64_t)host_allocs());
  cr_assert_eq((size_t)s.pinned_reserved_bytes.current, ca_sim_pinned_used(), "cudalloc and the device agree");
  CHECK_CONSISTENT();
}

/* A training loop: the same buffers in the same order every step. The
 * arena settles in a few steps (seen: the last chunk pinned in the 9th,
 * the same in every run since decay is off; jemalloc's thread-cache
 * flushes fall elsewhere in each step until then), then pins and gives
 * back nothing. */
Test(pinned, a_repeated_loop_makes_no_backend_call_after_warm_up) {
  core_start("sim_pinned_mb:4096,pinned_cache_mb:4096");
  int quiet = 0, step = 0;
  for (; quiet < QUIET && step < MAX_WARMUP; step++) {
    uint64_t before = host_allocs();
    round_trip(1, NULL, NULL, 0);
    quiet = host_allocs() == before ? quiet + 1 : 0;
  }
  cr_assert_eq(quiet, QUIET, "still pinning new chunks after %d steps", MAX_WARMUP);
  uint64_t calls = host_allocs(), frees = ca_sim_calls(CA_OP_host_free);
  for (int k = 0; k < 20; k++) round_trip(1, NULL, NULL, 0);
  cr_assert_eq(host_allocs() - calls, 0, "%lu chunks pinned after warm-up", (unsigned long)(host_allocs() - calls));
  cr_assert_eq(ca_sim_calls(CA_OP_host_free), frees);
  CHECK_CONSISTENT();
}

/* The arena's own books, read through the private copy's mallctl, against
 * cudalloc's: the bytes in live blocks, and the chunks behind the arena. */
static size_t je_size(const char *fmt, unsigned arena) {
  char name[128];
  snprintf(name, sizeof name, fmt, arena);
  size_t v = 0, sz = sizeof v;
  cr_assert_eq(ca_je_mallctl(name, &v, &sz, NULL, 0), 0, "mallctl %s", name);
  return v;
}

Test(pinned, jemalloc_statistics_agree_with_cudalloc) {
  core_start(NULL);
  void *p[300];
  uint64_t rng = 7;
  for (int i = 0; i < 300; i++) p[i] = host_alloc(mixed_size(&rng));
  for (int i = 0; i < 300; i += 3) ca_host_free(p[i]);
  unsigned arena, tcache;
  cr_assert(ca_pinned_jemalloc_ids(&arena, &tcache));
  /* blocks sitting in the arena's thread cache count as allocated to jemalloc */
  cr_assert_eq(ca_je_mallctl("tcache.flush", NULL, NULL, &tcache, sizeof tcache), 0);
  uint64_t epoch = 1;
  cr_assert_eq(ca_je_mallctl("epoch", NULL, NULL, &epoch, sizeof epoch), 0);
  size_t small = je_size("stats.arenas.%u.small.allocated", arena);
  size_t large = je_size("stats.arenas.%u.large.allocated", arena);
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t pactive = je_size("stats.arenas.%u.pactive", arena) * page;
  size_t pdirty = je_size("stats.arenas.%u.pdirty", arena) * page;
  size_t base = je_size("stats.arenas.%u.base", arena);
  cudalloc_pinned_stats_t s = pstats();
  cr_assert_eq((int64_t)(small + large), s.pinned_allocated_bytes.current,
               "jemalloc: %zu + %zu bytes allocated; cudalloc: %ld", small, large,
               (long)s.pinned_allocated_bytes.current);
  cr_assert_geq((int64_t)pactive, s.pinned_allocated_bytes.current);
  cr_assert_leq((int64_t)(pactive + pdirty + base), s.pinned_reserved_bytes.current,
                "what jemalloc holds (%zu active, %zu dirty, %zu metadata) lies in the pinned chunks (%ld)", pactive,
                pdirty, base, (long)s.pinned_reserved_bytes.current);
  cr_assert_eq(je_size("stats.arenas.%u.retained", arena), 0, "nothing retained outside the hooks");
  for (int i = 0; i < 300; i++)
    if (i % 3) ca_host_free(p[i]);
  CHECK_CONSISTENT();
}

// ----------------------------------------------------------------------------
// The cache limit
// ----------------------------------------------------------------------------

/* 24 blocks of 3 MiB, each in a chunk of its own (two do not fit one),
 * then all freed: what stays pinned after cudalloc_empty_cache, or after
 * the frees alone. */
static size_t pinned_after(const char *conf, bool empty) {
  core_start(conf);
  void *p[24];
  for (int i = 0; i < 24; i++) p[i] = host_alloc(3 * MiB);
  size_t before = ca_sim_pinned_used();
  cr_assert_geq(before, 24 * 3 * MiB);
  for (int i = 0; i < 24; i++) ca_host_free(p[i]);
  if (empty) cudalloc_empty_cache();
  CHECK_CONSISTENT();
  return ca_sim_pinned_used();
}

Test(pinned, frees_keep_at_most_the_cache_limit) {
  size_t kept = pinned_after("pinned_cache_mb:16", false);
  /* one chunk of jemalloc's metadata stays, plus at most the limit and one chunk of slack */
  cr_assert_leq(kept, (16 + 4 + 4) * MiB, "%zu MiB still pinned", kept / MiB);
  cr_assert_gt(pstats().pinned_backend_free.total, 0);
}

Test(pinned, a_large_limit_keeps_the_chunks) {
  size_t kept = pinned_after("pinned_cache_mb:1024", false);
  cr_assert_geq(kept, 24 * 3 * MiB);
  cr_assert_eq(pstats().pinned_backend_free.total, 0);
}

Test(pinned, empty_cache_gives_idle_chunks_back) {
  size_t kept = pinned_after("pinned_cache_mb:1024", true);
  cr_assert_leq(kept, 4 * MiB, "only the arena's metadata chunk stays, %zu MiB did", kept / MiB);
}

Test(pinned, shutdown_gives_everything_back) {
  core_start(NULL);
  host_alloc(5 * MiB);   /* still live: forgotten with the arena */
  host_alloc(100);
  cr_assert_gt(ca_sim_pinned_used(), 0);
  ca_pinned_shutdown();
  cr_assert_eq(ca_sim_pinned_used(), 0);
  cr_assert_eq(ca_sim_pinned_allocations(), 0);
}

// ----------------------------------------------------------------------------
// Chunks pinned separately stay apart
// ----------------------------------------------------------------------------

/* Two chunks, and the hooks asked to split and merge across them. */
static void two_chunks(void **a, void **b) {
  core_start(NULL);
  *a = host_alloc(3 * MiB);
  *b = host_alloc(3 * MiB);
  cr_assert(ca_pinned_chunks_hold((uintptr_t)*a, 3 * MiB) && ca_pinned_chunks_hold((uintptr_t)*b, 3 * MiB));
  cr_assert(!ca_pinned_chunks_hold((uintptr_t)*a, (uintptr_t)*b - (uintptr_t)*a + 1));
}

static bool merge(void *x, size_t nx, void *y, size_t ny) {
  return !ca_pinned_hooks.merge(&ca_pinned_hooks, x, nx, y, ny, true, 0);
}

Test(pinned, merge_and_split_stay_inside_one_chunk) {
  void *a, *b;
  two_chunks(&a, &b);
  char *ca = a;
  cr_assert(merge(ca, 4096, ca + 4096, 4096), "two halves of one chunk merge");
  cr_assert(!merge(a, 4096, b, 4096), "two chunks never merge");
  cr_assert(!ca_pinned_hooks.split(&ca_pinned_hooks, a, (uintptr_t)b - (uintptr_t)a + 4096, 4096, 4096, true, 0) ||
                (uintptr_t)b < (uintptr_t)a,
            "an extent across chunks is not split either");
  cr_assert(!ca_pinned_hooks.split(&ca_pinned_hooks, a, 8192, 4096, 4096, true, 0));
}

/* The guard broken (merge allowed across chunks): the test above fails. */
Test(pinned, merge_check_catches_a_merge_across_chunks) {
  void *a, *b;
  two_chunks(&a, &b);
  ca_debug.pinned_merge_across = true;
  cr_assert(merge(a, 4096, b, 4096), "the switch lets the hook merge two chunks, which the test refuses");
}

/* An extent handed back across two chunks is refused and counted, and
 * cudalloc_check reports it. */
Test(pinned, an_extent_across_chunks_is_refused_and_reported) {
  void *a, *b;
  two_chunks(&a, &b);
  uintptr_t lo = (uintptr_t)(a < b ? a : b), hi = (uintptr_t)(a < b ? b : a);
  capture_t cap;
  char out[1024];
  capture_begin(&cap);
  bool refused = ca_pinned_hooks.dalloc(&ca_pinned_hooks, (void *)lo, hi - lo + 4096, true, 0);
  int rc = cudalloc_check();
  capture_end(&cap, out, sizeof out);
  cr_assert(refused);
  cr_assert_eq(rc, CA_PINNED_CHECK_CROSSED, "%s", out);
  cr_assert_not_null(strstr(out, "crossed chunks"), "%s", out);
}

// ----------------------------------------------------------------------------
// Async copies in flight
// ----------------------------------------------------------------------------

/* p is freed while a copy on stream s still reads it: the next allocations
 * of its size must not return it until s completes. Returns whether p was
 * kept back while the copy was in flight. */
static bool in_flight_block_kept(bool break_guard) {
  core_start("sim_events:manual");
  ca_debug.pinned_ignore_copies = break_guard;
  ca_stream_t s = test_stream(false);
  void *dev = NULL;
  cr_assert_eq(cudalloc_malloc(&dev, 4096, (cudaStream_t)s), cudaSuccess);
  void *p = host_alloc(4096);
  ca_host_copy_issued(dev, p, 4096, s);   /* cudaMemcpyAsync(dev, p, ..., s) */
  cr_assert_eq(ca_host_free(p), CUDA_SUCCESS);
  bool kept = true;
  void *q[8];
  for (int i = 0; i < 8; i++) kept = kept && (q[i] = host_alloc(4096)) != p;
  if (!break_guard) cr_assert_eq(pstats().pinned_waiting_bytes.current, 4096);
  for (int i = 0; i < 8; i++) ca_host_free(q[i]);
  ca_sim_stream_complete(s);
  void *again = host_alloc(4096);   /* the waiting block goes back to the arena */
  ca_host_free(again);
  cr_assert_eq(pstats().pinned_waiting_bytes.current, 0);
  bool reused = false;
  for (int i = 0; i < 8 && !reused; i++) reused = (q[i] = host_alloc(4096)) == p;
  cr_assert(reused, "once the copy completed, the block is handed out again");
  CHECK_CONSISTENT();
  cudalloc_free(dev, (cudaStream_t)s);
  return kept;
}

Test(pinned, a_block_in_an_async_copy_waits_for_its_event) {
  cr_assert(in_flight_block_kept(false));
  cr_assert_geq(pstats().pinned_copies_tracked.total, 1);
}

/* The guard broken (copies ignored): the block comes back at once, and the
 * check above fails. */
Test(pinned, in_flight_check_catches_reuse_during_a_copy) {
  cr_assert_not(in_flight_block_kept(true));
}

/* The reuse oracle watches pinned hand-outs too: the copy is issued as the
 * simulated runtime issues cudaMemcpyAsync (a touch of the host range on
 * s, then ca_host_copy_issued). Returns the oracle's violations after p is
 * freed and its size asked for again while the copy is in flight. */
static uint64_t oracle_violations_on_reuse(bool break_guard) {
  core_start("sim_events:manual");
  ca_debug.pinned_ignore_copies = break_guard;
  ca_stream_t s = test_stream(false);
  void *dev = NULL;
  cr_assert_eq(cudalloc_malloc(&dev, 4096, (cudaStream_t)s), cudaSuccess);
  void *p = host_alloc(4096);
  cr_assert_eq(ca_sim_touch(s, p, 4096, 0), CUDA_SUCCESS);
  cr_assert_eq(ca_sim_touch(s, dev, 4096, 1), CUDA_SUCCESS);
  ca_host_copy_issued(dev, p, 4096, s);
  cr_assert_eq(ca_host_free(p), CUDA_SUCCESS);
  capture_t cap;
  char out[2048];
  capture_begin(&cap);   /* a violation is also printed: keep it out of make test */
  void *q = host_alloc(4096);
  capture_end(&cap, out, sizeof out);
  uint64_t v = ca_sim_oracle_violations();
  cr_assert_eq(q == p, break_guard, "the broken guard hands p out again at once, the guard does not");
  if (v) cr_assert_not_null(strstr(out, "any stream"), "%s", out);
  ca_sim_oracle_reset();
  ca_host_free(q);
  ca_sim_stream_complete(s);
  cudalloc_free(dev, (cudaStream_t)s);
  return v;
}

Test(pinned, the_reuse_oracle_sees_no_pinned_block_reused_during_its_copy) {
  cr_assert_eq(oracle_violations_on_reuse(false), 0);
}

/* The guard broken: the oracle, not only the stats, catches the reuse. */
Test(pinned, the_reuse_oracle_catches_a_pinned_block_reused_during_its_copy) {
  cr_assert_eq(oracle_violations_on_reuse(true), 1);
}

Test(pinned, later_copies_on_the_same_stream_reuse_one_event) {
  core_start("sim_events:manual");
  ca_stream_t s = test_stream(false);
  char *p = host_alloc(1 * MiB);
  for (int i = 0; i < 100; i++) ca_host_copy_issued(p + i * 4096, NULL, 4096, s);
  cr_assert_eq(ca_sim_calls(CA_OP_event_create), 1, "one range, one stream: one event, recorded again");
  cr_assert_eq(ca_host_free(p), CUDA_SUCCESS);
  cr_assert_eq(pstats().pinned_waiting_bytes.current, (int64_t)ca_je_sallocx(p, 0));
  ca_sim_stream_complete(s);
  cudalloc_empty_cache();
  cr_assert_eq(pstats().pinned_waiting_bytes.current, 0);
}

/* Out of pinned memory while a freed block waits for its copy: the
 * allocation waits for the copy instead of failing. */
Test(pinned, out_of_memory_waits_for_copies_in_flight) {
  core_start("sim_events:manual,sim_pinned_mb:12");   /* metadata, and room for one 5 MiB block */
  ca_stream_t s = test_stream(false);
  void *p = host_alloc(5 * MiB);
  ca_host_copy_issued(p, NULL, 5 * MiB, s);
  ca_host_free(p);
  void *q = host_alloc(5 * MiB);
  cr_assert_eq(q, p, "the only place it fits is the block the copy used, after the copy");
  cr_assert_eq(pstats().pinned_waiting_bytes.current, 0);
  CHECK_CONSISTENT();
}

Test(pinned, copies_that_touch_no_pinned_memory_record_nothing) {
  core_start("sim_events:manual");
  ca_stream_t s = test_stream(false);
  void *p = host_alloc(4096);
  char plain[64];
  ca_host_copy_issued(plain, plain + 32, 32, s);
  cr_assert_eq(ca_sim_calls(CA_OP_event_record), 0);
  ca_host_free(p);
}

// ----------------------------------------------------------------------------
// Bad input
// ----------------------------------------------------------------------------

Test(pinned, null_out_pointer_and_unknown_flags_are_invalid) {
  core_start(NULL);
  cr_assert_eq(ca_host_alloc(NULL, 4096, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  void *p = (void *)0x1;
  cr_assert_eq(ca_host_alloc(&p, 4096, 0x80, NULL), CUDA_ERROR_INVALID_VALUE);
  cr_assert_eq(p, (void *)0x1, "nothing written on an error");
  cr_assert_eq(ca_host_alloc(&p, 4096, CA_HOST_WRITE_COMBINED, NULL), CUDA_ERROR_NOT_SUPPORTED,
               "write-combined memory is the real runtime's to serve");
  cr_assert_eq(ca_host_alloc(&p, 4096, CA_HOST_PORTABLE | CA_HOST_MAPPED, NULL), CUDA_SUCCESS);
  cr_assert_eq(ca_host_free(p), CUDA_SUCCESS);
  cr_assert_eq(ca_host_alloc(&p, 0, 0, NULL), CUDA_SUCCESS);
  cr_assert_null(p, "size 0: NULL, as cudaMalloc");
  cr_assert_eq(pstats().pinned_num_allocs.total, 1);
}

Test(pinned, double_free_and_interior_pointer_are_refused_and_lose_nothing) {
  core_start(NULL);
  char *keep = host_alloc(10000);
  char *p = host_alloc(20000);
  memset(keep, 0x5a, 10000);
  cr_assert_eq(ca_host_free(p), CUDA_SUCCESS);
  capture_t cap;
  char out[2048];
  capture_begin(&cap);
  CUresult twice = ca_host_free(p);
  CUresult inside = ca_host_free(keep + 16);
  capture_end(&cap, out, sizeof out);
  cr_assert_eq(twice, CUDA_ERROR_INVALID_VALUE, "double free");
  cr_assert_eq(inside, CUDA_ERROR_INVALID_VALUE, "interior pointer");
  cr_assert_eq(count_lines(out), 2, "one line each:\n%s", out);
  cr_assert_not_null(strstr(out, "not a live pinned block"), "%s", out);
  cudalloc_pinned_stats_t s = pstats();
  cr_assert_eq(s.pinned_num_bad_frees.total, 2);
  cr_assert_eq(s.pinned_num_live_blocks.current, 1, "the live block is still live");
  for (int i = 0; i < 10000; i++) cr_assert_eq((unsigned char)keep[i], 0x5a);
  cr_assert_eq(ca_host_free(keep), CUDA_SUCCESS);
  CHECK_CONSISTENT();
}

Test(pinned, foreign_pointers_are_not_cudallocs) {
  core_start(NULL);
  host_alloc(64);
  char stack[16];
  void *heap = malloc(64);
  cr_assert_eq(ca_host_free(stack), CUDA_ERROR_NOT_FOUND, "the shim passes it to the real free");
  cr_assert_eq(ca_host_free(heap), CUDA_ERROR_NOT_FOUND);
  cr_assert_eq(ca_host_free(NULL), CUDA_SUCCESS);
  free(heap);
  cr_assert_eq(pstats().pinned_num_bad_frees.total, 0);
}

Test(pinned, absurd_sizes_fail_cleanly) {
  core_start("sim_pinned_mb:64");
  char *keep = host_alloc(1000);
  memset(keep, 7, 1000);
  size_t sizes[] = {SIZE_MAX, SIZE_MAX - 4095, (size_t)1 << 62, (size_t)1 << 40, 65 * MiB};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    void *p = (void *)0x1;
    cr_assert_eq(ca_host_alloc(&p, sizes[i], 0, NULL), CUDA_ERROR_OUT_OF_MEMORY, "size %zu", sizes[i]);
    cr_assert_eq(p, (void *)0x1);
  }
  cudalloc_pinned_stats_t s = pstats();
  cr_assert_eq(s.pinned_num_ooms.total, 5);
  cr_assert_eq(s.pinned_num_live_blocks.current, 1);
  cr_assert_eq(keep[999], 7);
  cr_assert_eq(ca_host_free(host_alloc(48 * MiB)), CUDA_SUCCESS, "what fits still works");
  CHECK_CONSISTENT();
}

Test(pinned, a_failed_pin_is_an_out_of_memory_and_the_next_works) {
  /* the first pins the arena's metadata; a failed pin is tried once more */
  core_start("sim_fail:host_alloc@2,sim_fail:host_alloc@3");
  void *p = (void *)0x1;
  cr_assert_eq(ca_host_alloc(&p, 3 * MiB, 0, NULL), CUDA_ERROR_OUT_OF_MEMORY);
  cr_assert_eq(ca_host_free(host_alloc(3 * MiB)), CUDA_SUCCESS);
  CHECK_CONSISTENT();
}

// ----------------------------------------------------------------------------
// Reports and threads
// ----------------------------------------------------------------------------

Test(pinned, leaks_and_summary_name_pinned_memory) {
  core_start(NULL);
  host_alloc(12345);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cudalloc_report(f);
  cudalloc_print_stats(f);
  fclose(f);
  cr_assert_not_null(strstr(buf, "Leaked 12345 bytes at 0x"), "%s", buf);
  cr_assert_not_null(strstr(buf, " of pinned host memory\n"), "%s", buf);
  cr_assert_not_null(strstr(buf, "LEAK SUMMARY: 12345 bytes leaked in 1 allocations (pinned host memory)"), "%s", buf);
  cr_assert_not_null(strstr(buf, "pinned host memory: peak allocated"), "%s", buf);
  cr_assert_not_null(strstr(buf, "leaks: 1 pinned blocks"), "%s", buf);
  cr_assert_not_null(strstr(buf, "cudalloc pinned host memory"), "%s", buf);
  free(buf);
}

static void *churn(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  void *p[64] = {0};
  for (int i = 0; i < 4000; i++) {
    int k = (int)(rng_next(&rng) % 64);
    if (p[k]) cr_assert_eq(ca_host_free(p[k]), CUDA_SUCCESS);
    p[k] = host_alloc(mixed_size(&rng) % (256 * 1024) + 1);
    *(volatile char *)p[k] = 1;
  }
  for (int k = 0; k < 64; k++) ca_host_free(p[k]);
  return NULL;
}

Test(pinned, threads_allocate_and_free_at_once) {
  core_start(NULL);
  pthread_t t[4];
  for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(i + 1));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  cr_assert_eq(pstats().pinned_num_live_blocks.current, 0);
  CHECK_CONSISTENT();
}

/* The same churn with copies in flight: each thread's copies on a stream
 * of its own (cudaMemcpyAsync from a pinned block), completed now and then
 * by the thread, while another thread empties the caches, reads the
 * statistics, checks the invariants and prints the statistics. Under
 * make test-tsan, so that the pinned arena's waiting blocks, events and
 * statistics are looked at from every side at once. */
static int pinned_running;
static void *churn_with_copies(void *arg) {
  uint64_t rng = (uint64_t)(uintptr_t)arg;
  ca_sim_thread_init();   /* the device's context current here, as a program's thread makes it */
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  void *dev = NULL;
  cr_assert_eq(cudalloc_malloc(&dev, 256 * 1024, (cudaStream_t)s), cudaSuccess);
  void *p[32] = {0};
  for (int i = 0; i < 3000; i++) {
    int k = (int)(rng_next(&rng) % 32);
    if (p[k]) cr_assert_eq(ca_host_free(p[k]), CUDA_SUCCESS);
    size_t size = mixed_size(&rng) % (256 * 1024) + 1;
    p[k] = host_alloc(size);
    *(volatile char *)p[k] = 1;
    if (rng_next(&rng) % 2) ca_host_copy_issued(dev, p[k], size, s);   /* cudaMemcpyAsync(dev, p[k], size, s) */
    if (rng_next(&rng) % 16 == 0) ca_sim_stream_complete(s);
  }
  for (int k = 0; k < 32; k++) ca_host_free(p[k]);
  ca_sim_stream_complete(s);
  cr_assert_eq(cudalloc_free(dev, (cudaStream_t)s), cudaSuccess);
  return NULL;
}

static void *disturb_pinned(void *arg) {
  int *turns = arg;
  FILE *sink = fopen("/dev/null", "w");
  cr_assert_not_null(sink);
  while (__atomic_load_n(&pinned_running, __ATOMIC_ACQUIRE)) {
    cudalloc_pinned_stats_t st;
    switch ((*turns)++ % 4) {
    case 0: cr_assert_eq(cudalloc_empty_cache(), cudaSuccess); break;
    case 1: cr_assert_eq(cudalloc_get_pinned_stats(&st), cudaSuccess); cr_assert_geq(st.pinned_waiting_bytes.current, 0); break;
    case 2: cr_assert_eq(cudalloc_check(), 0); break;
    default: cudalloc_print_stats(sink); break;
    }
  }
  fclose(sink);
  return NULL;
}

Test(pinned, threads_with_copies_in_flight_while_caches_are_emptied) {
  core_start("sim_events:manual");
  pthread_t t[4], other;
  int turns = 0;
  __atomic_store_n(&pinned_running, 1, __ATOMIC_RELEASE);
  pthread_create(&other, NULL, disturb_pinned, &turns);
  for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn_with_copies, (void *)(i + 7));
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  __atomic_store_n(&pinned_running, 0, __ATOMIC_RELEASE);
  pthread_join(other, NULL);
  cr_assert_geq(turns, 4, "each disturbance ran while the threads did");
  cr_assert_gt(pstats().pinned_copies_tracked.total, 0);
  cr_assert_eq(pstats().pinned_num_live_blocks.current, 0);
  CHECK_CONSISTENT();
}

/* The simulated machine's pinned memory: a capacity, whole allocations
 * given back, anything else refused and counted as a broken rule. */
Test(pinned, the_simulated_device_pins_as_the_driver_does) {
  core_start("sim_pinned_mb:8");
  const ca_backend_t *be = &ca_backend_sim;
  void *p = NULL, *q = NULL;
  uint64_t v0 = ca_sim_violations();
  cr_assert_eq(be->host_alloc(0, 4 * MiB, &p), CUDA_SUCCESS);
  cr_assert_eq(be->host_alloc(0, 8 * MiB, &q), CUDA_ERROR_OUT_OF_MEMORY, "beyond sim_pinned_mb");
  cr_assert_eq(be->host_alloc(0, 100, &q), CUDA_ERROR_INVALID_VALUE, "not whole pages");
  cr_assert_eq(be->host_free((char *)p + 4096, 4096), CUDA_ERROR_INVALID_VALUE, "part of one");
  cr_assert_eq(be->host_free(p, 2 * MiB), CUDA_ERROR_INVALID_VALUE, "another size");
  cr_assert_eq(ca_sim_violations(), v0 + 3);
  cr_assert_eq(ca_sim_pinned_used(), 4 * MiB);
  cr_assert_eq(be->host_free(p, 4 * MiB), CUDA_SUCCESS);
  cr_assert_eq(be->host_free(p, 4 * MiB), CUDA_ERROR_INVALID_VALUE, "twice");
  cr_assert_eq(ca_sim_pinned_used(), 0);
}
