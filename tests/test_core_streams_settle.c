/* Streams that settle (alloc/settle.c): a stream that misses grows, or
 * merges its own frees, before it takes the blocks another stream just
 * freed and is about to reuse without an event.
 *
 * The first test is bench_alloc's GPU-like pattern on two streams of one
 * thread (sizes 512 B to 8 MiB, about log-uniform; 16 live blocks per
 * stream, the oldest freed before each allocation; the pairs alternate
 * between the streams). Once warm, a pass of the sequence must make no
 * slow path and no backend call. Before settle.c every slow path sealed
 * and polled both streams' queues, and the streams took each other's
 * blocks for good: on main this test failed with "no pass of the
 * sequence was quiet within 30 passes; the last one made 42 slow paths,
 * 345 event calls, 27 memory calls" (11ce599), and "... 15 slow paths, 120
 * event calls, 8 memory calls" once churn.c kept pages from moving back
 * and forth (3fc0112); it settled in 7 or 8 passes then, from the 27th
 * pass of every run in the twenty-seventh session, and with the old
 * ladder planted back (settle_take_fresh) it does not. The next two show the rule on one block: a stream's latest free
 * stays its own while memory is not short. The last two check what must
 * not change: a block freed under its stream's pending work goes to no
 * other stream before that work is done (the reuse oracle, core_fini), and
 * the planted fault skip_fences is caught on the new rungs. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("device work is simulated: touches, manual completion, counters"); }

TestSuite(core_streams_settle, .init = sim_only, .fini = core_fini);

#define LIVE 16          /* live blocks per stream, as bench_alloc's window */
#define SEQ 4096         /* sizes in the sequence, each stream's pass */
#define MAX_PASSES 40   /* 30 until the twenty-seventh session, when it settled at the 27th */
#define QUIET_RUN 3      /* passes in a row without a call: settled, not one lucky pass */

/* About log-uniform in [512 B, 8 MiB): a power of two from 512 B to
 * 4 MiB, then uniform up to twice that. */
static void gpu_like_sizes(size_t *sizes, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    uint64_t r = rng_next(&seed);
    size_t base = (size_t)512 << (r % 14);
    sizes[i] = base + (size_t)((r >> 8) % base);
  }
}

typedef struct lane_s {
  ca_stream_t stream;
  void *live[LIVE];
  size_t next;
} lane_t;

/* One pass: SEQ pairs on each lane, alternating between the lanes. */
static void pass(lane_t *lanes, int nl, const size_t *sizes) {
  for (size_t i = 0; i < SEQ * (size_t)nl; i++) {
    lane_t *l = &lanes[i % (size_t)nl];
    size_t k = l->next++;
    void **slot = &l->live[k % LIVE];
    if (*slot) cr_assert_eq(cudalloc_free(*slot, l->stream), cudaSuccess);
    cr_assert_eq(cudalloc_malloc(slot, sizes[k % SEQ], l->stream), cudaSuccess);
  }
}

typedef struct calls_s {
  int64_t slow, events, memory;
} calls_t;

static calls_t calls_now(void) {
  cudalloc_stats_t s = stats0();
  int64_t events = s.backend_event_record.total + s.backend_event_query.total + s.backend_sync.total;
  return (calls_t){s.num_retries.total, events, memory_calls(&s)};
}

/* Passes until QUIET_RUN in a row make no slow path and no backend call;
 * returns the first pass of that run (MAX_PASSES + 1: none began within
 * MAX_PASSES) and the last noisy pass's calls. A lone quiet pass may come
 * before a sequence settles, and where it falls moves with the addresses
 * of the run: the first quiet pass taken as settled, the same test with
 * the sizes of seed 7 failed once in six runs (the twenty-seventh session). */
static int passes_until_quiet(lane_t *lanes, int nl, const size_t *sizes, calls_t *last) {
  *last = (calls_t){0, 0, 0};
  for (int p = 1, run = 0; p < MAX_PASSES + QUIET_RUN; p++) {
    calls_t a = calls_now();
    pass(lanes, nl, sizes);
    calls_t b = calls_now();
    calls_t c = {b.slow - a.slow, b.events - a.events, b.memory - a.memory};
    if (c.slow || c.events || c.memory) {
      *last = c;
      run = 0;
    } else if (++run == QUIET_RUN) {
      return p - QUIET_RUN + 1;
    }
  }
  return MAX_PASSES + 1;
}

Test(core_streams_settle, two_gpu_like_streams_settle) {
  core_start("sim_events:lag,sim_capacity_mb:4096");
  static size_t sizes[SEQ];
  gpu_like_sizes(sizes, SEQ, 12);
  lane_t lanes[2] = {{.stream = test_stream(true)}, {.stream = test_stream(true)}};
  calls_t last;
  int passes = passes_until_quiet(lanes, 2, sizes, &last);
  cr_assert_leq(passes, MAX_PASSES,
                "no %d passes in a row were quiet from a pass within the first %d; the last noisy one made %lld slow "
                "paths, %lld event calls, %lld memory calls",
                QUIET_RUN, MAX_PASSES, (long long)last.slow, (long long)last.events, (long long)last.memory);
  /* and stays so */
  calls_t a = calls_now();
  pass(lanes, 2, sizes);
  pass(lanes, 2, sizes);
  calls_t b = calls_now();
  cr_assert_eq(b.slow - a.slow, 0, "slow paths after the quiet pass");
  cr_assert_eq(b.events - a.events, 0, "event calls after the quiet pass");
  cr_assert_eq(b.memory - a.memory, 0, "memory calls after the quiet pass");
  CHECK_CONSISTENT();
}

/* With the planted fault settle_take_fresh (the ladder as before
 * settle.c), the same pattern does not settle: the test above can fail. */
Test(core_streams_settle, taking_fresh_frees_does_not_settle) {
  core_start("sim_events:lag,sim_capacity_mb:4096");
  ca_debug.settle_take_fresh = true;
  static size_t sizes[SEQ];
  gpu_like_sizes(sizes, SEQ, 12);
  lane_t lanes[2] = {{.stream = test_stream(true)}, {.stream = test_stream(true)}};
  calls_t last;
  cr_assert_gt(passes_until_quiet(lanes, 2, sizes, &last), MAX_PASSES, "it settled with the fault planted");
  ca_debug.settle_take_fresh = false;
  CHECK_CONSISTENT();
}

/* Stream b frees a block; a then misses for the same size while memory is
 * not short. a grows, and b gets its block back with no event: b's own
 * cache. With the planted fault a takes b's block (after an event on b)
 * and b has to look elsewhere. Returns whether a got b's block. */
static bool a_takes_bs_latest_free(bool fault) {
  core_start("sim_events:auto,thread_cache_kb:0");
  ca_debug.settle_take_fresh = fault;
  ca_stream_t a = test_stream(true), b = test_stream(true);
  void *x, *y, *x2;
  cr_assert_eq(cudalloc_malloc(&x, 6 * MiB, b), cudaSuccess);
  cr_assert_eq(cudalloc_free(x, b), cudaSuccess);
  int64_t records = stats0().backend_event_record.total;
  cr_assert_eq(cudalloc_malloc(&y, 6 * MiB, a), cudaSuccess);
  bool taken = y == x;
  if (!taken) cr_assert_eq(stats0().backend_event_record.total, records, "a's slow path recorded no event");
  cr_assert_eq(cudalloc_malloc(&x2, 6 * MiB, b), cudaSuccess);
  if (!taken) cr_assert_eq(x2, x, "b reuses its own free");
  ca_debug.settle_take_fresh = false;
  cudalloc_free(y, a);
  cudalloc_free(x2, b);
  CHECK_CONSISTENT();
  return taken;
}

Test(core_streams_settle, a_stream_keeps_its_latest_frees) {
  cr_assert_not(a_takes_bs_latest_free(false), "a took the block b had just freed");
}

Test(core_streams_settle, taking_them_is_caught) {
  cr_assert(a_takes_bs_latest_free(true), "with the fault planted a takes b's block");
}

/* Memory short of the slack: b's block, under b's kernel, is sealed by a's
 * first slow path but not taken (a grows); a's second one waits for that
 * fence (slack.c, fences sealed before) and takes the block only then. The
 * oracle (core_fini) checks that no hand-out came under the kernel. With
 * skip_fences planted (every fence taken for complete) the second slow
 * path's first rung, the poll, hands a the block under b's kernel, and the
 * oracle says so. Returns whether it did. */
static bool pending_block_of_another_stream(bool skip) {
  core_start("sim_events:manual,thread_cache_kb:0,sim_capacity_mb:16384");
  ca_stream_t a = test_stream(true), b = test_stream(true);
  void *x, *y1, *y2;
  cr_assert_eq(cudalloc_malloc(&x, 64 * MiB, b), cudaSuccess);
  TOUCH(b, x, 64 * MiB, true);
  cr_assert_eq(cudalloc_free(x, b), cudaSuccess);
  ca_debug.skip_fences = skip;
  cr_assert_eq(cudalloc_malloc(&y1, 64 * MiB, a), cudaSuccess);
  cr_assert_neq(y1, x, "a grew: b's block was sealed, not taken");
  int64_t waits = stats0().num_waits.total;
  capture_t cap;   /* the oracle's line, when it fires */
  capture_begin(&cap);
  cr_assert_eq(cudalloc_malloc(&y2, 64 * MiB, a), cudaSuccess);
  char out[1024];
  capture_end(&cap, out, sizeof out);
  ca_debug.skip_fences = false;
  cr_assert_eq(y2, x, "the second slow path took b's block");
  bool early = ca_sim_oracle_violations() > 0;
  if (early) ca_sim_oracle_reset();
  else cr_assert_eq(stats0().num_waits.total, waits + 1, "after one wait for b's kernel");
  cudalloc_free(y1, a);
  cudalloc_free(y2, a);
  ca_sim_complete_all();
  CHECK_CONSISTENT();
  return early;
}

Test(core_streams_settle, another_streams_pending_block_waits_for_its_work) {
  cr_assert_not(pending_block_of_another_stream(false));
}

Test(core_streams_settle, fences_taken_for_complete_are_caught) {
  cr_assert(pending_block_of_another_stream(true), "with skip_fences the oracle saw b's block under its kernel");
}
