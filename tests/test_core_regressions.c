/* Regression tests of the core's defects found by the review of issue 9:
 * out-of-memory reported while memory waits to be reused, memory lost to
 * a failed driver call, devices without virtual memory management, and
 * the smaller mistakes of the API. Each test says how it failed before
 * its fix. */
#include "core_testing.h"

#include <limits.h>
#include <pthread.h>

static void sim_only(void) { SKIP_ON_CUDA("a small capacity, manual events and injected faults"); }
TestSuite(core_regressions, .init = sim_only, .fini = cudalloc_shutdown);

// ----------------------------------------------------------------------------
// Wrong out-of-memory
// ----------------------------------------------------------------------------

/* cudaMalloc/cudaFree of random sizes up to 4 MiB, nothing kept live, on a
 * 32 MiB device whose work completes only when waited for. A free merges
 * with pending neighbours into the newest batch, so the oldest sealed
 * fences are often empty. Before the fix the ladder stopped at the first
 * wait that released 0 bytes: 112 of 2000 allocations failed
 * (expandable segments) with nothing live. */
/* (stderr is captured: before the fix each failure printed a report) */
static void random_cudafree_loop(const char *conf, int n) {
  core_start(conf);
  uint64_t rng = 7;
  int failed = 0;
  for (int i = 0; i < n; i++) {
    void *p;
    size_t size = 1 + rng_next(&rng) % (4 * MiB);
    if (ca_malloc(&p, size, NULL, NULL) != CUDA_SUCCESS) {
      failed++;
      continue;
    }
    cr_assert_eq(ca_free_sync(p), CUDA_SUCCESS);
  }
  cr_assert_eq(failed, 0, "%d of %d allocations failed with nothing live", failed, n);
  cr_assert_eq(stats0().num_ooms.total, 0);
  CHECK_CONSISTENT();
}

Test(core_regressions, ladder_waits_past_empty_fences_expandable, .init = cr_redirect_stderr) {
  random_cudafree_loop("sim_capacity_mb:32,sim_events:manual", 2000);
}

Test(core_regressions, ladder_waits_past_empty_fences_classic, .init = cr_redirect_stderr) {
  random_cudafree_loop("sim_capacity_mb:32,sim_events:manual,expandable_segments:false", 2000);
}

/* Classic mode: one 8.4 MiB free block behind sixteen smaller free blocks
 * of the same size bin ([8, 8.5) MiB), and an 8.3 MiB request with the
 * device full. Before the fix the search gave up after 16 blocks of the bin
 * and the request failed, while the report said "largest free block 8.4
 * MiB". */
Test(core_regressions, best_fit_finds_a_block_behind_many_smaller_ones, .init = cr_redirect_stderr) {
  core_start("sim_capacity_mb:340,expandable_segments:false");
  const size_t seg = 20 * MiB;
  void *x[17], *filler[17];
  for (int i = 0; i < 17; i++) {
    size_t size = i == 0 ? 8 * MiB + 400 * 1024 : 8 * MiB + 100 * 1024 + (size_t)i * 8 * 1024;
    cr_assert_eq(cudalloc_malloc(&x[i], size, 0), cudaSuccess, "block %d", i);
    cr_assert_eq(cudalloc_malloc(&filler[i], seg - size, 0), cudaSuccess, "filler %d", i);
  }
  cr_assert_eq(stats0().num_segments.current, 17, "one segment each");
  for (int i = 0; i < 17; i++) cr_assert_eq(cudalloc_free_sync(x[i]), cudaSuccess);   /* the 8.4 MiB block first */
  cudalloc_step();
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 8 * MiB + 300 * 1024, 0), cudaSuccess, "%s", captured_stderr());
  cr_assert_eq(p, x[0], "the only block that fits");
  cr_assert_eq(stats0().num_ooms.total, 0);
  CHECK_CONSISTENT();
}
