/* Waiting for pending frees instead of growing past the slack (alloc/slack.c).
 *
 * Each test is a small sequence that reproduces what a shared snapshot did
 * before the fix (make economy, docs/benchmarks.md): freed memory waiting
 * for device work while a growth created new pages beside it. Device work
 * here is what TOUCH issues and ca_sim_stream_complete finishes, as the
 * replay's free_completed does; the oracle (core_fini) checks that no
 * waited-for block was handed out early. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("device work is simulated: touches, manual completion"); }

TestSuite(core_slack, .init = sim_only, .fini = core_fini);

/* reserved within the slack over allocated memory, and a page */
static void assert_within_slack(const cudalloc_stats_t *s) {
  double bound = (double)s->allocated_bytes.current * (1.0 + CA_PAGE_SLACK) + (double)dev0()->page;
  cr_assert_leq((double)s->reserved_bytes.current, bound, "reserved %.1f MiB for %.1f MiB allocated (%lld waits)",
                (double)s->reserved_bytes.current / MiB, (double)s->allocated_bytes.current / MiB,
                (long long)s->num_waits.total);
}

/* One stream, as decomfl-opt125m and gcn device 1 (1.048 and 1.055 x peak
 * live): blocks the stream freed, their work since completed (the trace's
 * free_completed came before any fence was sealed), wait in its queue; a
 * request larger than each of them sealed a fence that nothing completed,
 * and 24 MiB were created beside 24 MiB pending. Before the fix the
 * assertion failed with "reserved 66.0 MiB for 42.0 MiB allocated (0 waits)". */
Test(core_slack, one_streams_pending_blocks_are_waited_for_before_growing) {
  core_start("expandable_segments:true,sim_events:manual");
  ca_stream_t s = test_stream(true);
  void *a, *live, *b, *big;
  cr_assert_eq(cudalloc_malloc(&a, 12 * MiB, s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&live, 18 * MiB, s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 12 * MiB, s), cudaSuccess);
  TOUCH(s, a, 12 * MiB, true);
  TOUCH(s, b, 12 * MiB, true);
  cr_assert_eq(cudalloc_free(a, s), cudaSuccess);
  cr_assert_eq(cudalloc_free(b, s), cudaSuccess);
  ca_sim_stream_complete(s);
  cr_assert_eq(cudalloc_malloc(&big, 24 * MiB, s), cudaSuccess);
  cudalloc_stats_t st = stats0();
  assert_within_slack(&st);
  cr_assert_geq(st.num_waits.total, 1, "the pending frees were waited for");
  CHECK_CONSISTENT();
  cudalloc_free(big, s);
  cudalloc_free(live, s);
}

/* Ten streams, as select-n-llama7b-10streams (1.456 x peak live): what
 * one stream freed is needed by the next, and each growth created new
 * pages while the other streams' blocks waited. Before the fix the
 * assertion failed with "reserved 80.0 MiB for 8.0 MiB allocated (0 waits)". */
Test(core_slack, another_streams_pending_blocks_are_waited_for_before_growing) {
  core_start("expandable_segments:true,sim_events:manual");
  ca_stream_t st[10];
  for (int i = 0; i < 10; i++) st[i] = test_stream(true);
  for (int i = 0; i < 10; i++) {
    void *p;
    cr_assert_eq(cudalloc_malloc(&p, 8 * MiB, st[i]), cudaSuccess);
    TOUCH(st[i], p, 8 * MiB, true);
    cr_assert_eq(cudalloc_free(p, st[i]), cudaSuccess);
    ca_sim_stream_complete(st[i]);
  }
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 8 * MiB, st[0]), cudaSuccess);
  cudalloc_stats_t s = stats0();
  assert_within_slack(&s);
  cr_assert_leq(s.reserved_bytes.peak, (int64_t)(8 * MiB), "the first stream's 8 MiB served every stream");
  CHECK_CONSISTENT();
  cudalloc_free(p, st[0]);
}

/* With the slack unspent nothing waits: 1 MiB pending on another stream
 * beside 100 MiB live, and a 2 MiB growth stays within 2 %. (Shown to fail
 * with the slack test of slack.c made always true.) */
Test(core_slack, nothing_waits_while_growth_stays_within_the_slack) {
  core_start("expandable_segments:true,sim_events:manual");
  ca_stream_t a = test_stream(true), b = test_stream(true);
  void *live, *small, *p;
  cr_assert_eq(cudalloc_malloc(&live, 100 * MiB, a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&small, 2 * MiB, a), cudaSuccess);
  TOUCH(a, small, 2 * MiB, true);
  cr_assert_eq(cudalloc_free(small, a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&p, 2 * MiB, b), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_waits.total, 0);
  cr_assert_eq(s.backend_sync.total, 0);
  cr_assert_eq(s.backend_unmap.total, 0, "memory is not short: nothing unmapped");
  CHECK_CONSISTENT();
  cudalloc_free(p, b);
  cudalloc_free(live, a);
}

/* Pending memory under half the slack is not worth a wait: 512 KiB
 * pending beside 100 MiB live, and a growth past the slack (10 MiB free
 * whose pages move) grows without waiting. (Shown to fail with the test
 * of slack.c back to "any pending byte".) */
Test(core_slack, a_little_pending_memory_is_not_waited_for) {
  core_start("expandable_segments:true,sim_events:auto");
  ca_stream_t a = test_stream(true), b = test_stream(true);
  void *x, *live, *small, *p;
  cr_assert_eq(cudalloc_malloc(&x, 10 * MiB, a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&live, 100 * MiB, a), cudaSuccess);
  cr_assert_eq(cudalloc_free(x, a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&small, 512 * 1024, a), cudaSuccess);   /* a slow path: x's fence completes */
  cr_assert_geq(dev0()->pools[CA_POOL_LARGE].bins.bytes, 8 * MiB, "x is free (a page of it may have moved to the small pool)");
  ca_sim_set_manual_events(1);
  TOUCH(a, small, 512 * 1024, true);
  cr_assert_eq(cudalloc_free(small, a), cudaSuccess);
  int64_t moves = stats0().num_page_moves.total;
  cr_assert_eq(cudalloc_malloc(&p, 20 * MiB, b), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_waits.total, 0);
  cr_assert_gt(s.num_page_moves.total, moves, "the growth was past the slack: x's pages moved");
  CHECK_CONSISTENT();
  cudalloc_free(p, b);
  cudalloc_free(live, a);
}

/* Classic segments are left as they were: their memory cannot move, so
 * waiting would only delay the same growth (32 MiB: a segment of its own,
 * no room left beside it). Shown to fail with slack.c's classic check
 * removed. */
Test(core_slack, classic_segments_do_not_wait) {
  core_start("expandable_segments:false,sim_events:manual");
  ca_stream_t a = test_stream(true), b = test_stream(true);
  void *p, *q;
  cr_assert_eq(cudalloc_malloc(&p, 32 * MiB, a), cudaSuccess);
  TOUCH(a, p, 32 * MiB, true);
  cr_assert_eq(cudalloc_free(p, a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&q, 32 * MiB, b), cudaSuccess);
  cr_assert_eq(stats0().num_waits.total, 0);
  CHECK_CONSISTENT();
  cudalloc_free(q, b);
}
