/* Physical chunks (alloc/pages.c): a run of pages is created with one
 * driver call, growth while memory is not short unmaps nothing, pages
 * still move out of free holes when reserved memory would pass active
 * memory by more than the slack, and a chunk goes back to the driver only
 * whole. The checker's chunk invariant is provoked in test_core_check. */
#include "core_testing.h"


static void sim_only(void) { SKIP_ON_CUDA("the simulated device counts its driver calls"); }

TestSuite(core_chunks, .init = sim_only, .fini = core_fini);

static size_t pages(size_t bytes) { return bytes / dev0()->page; }

/* Before chunks, one create per 2 MiB page: 32 for this block (so the
 * creates assertion failed with "32 creates"). */
Test(core_chunks, a_large_block_costs_one_create_and_one_set_access) {
  core_start("expandable_segments:true");
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 64 * MiB, 0), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.backend_create.total, 1, "%lld creates", (long long)s.backend_create.total);
  cr_assert_eq(s.backend_map.total, (int64_t)pages(64 * MiB), "each page is mapped on its own, to move alone later");
  cr_assert_eq(s.backend_set_access.total, 1);
  cr_assert_eq(s.reserved_bytes.current, (int64_t)(64 * MiB));
  CHECK_CONSISTENT();
  cudalloc_free(p, 0);
}

/* Blocks that stay live: every growth creates, none unmaps or moves. */
Test(core_chunks, growth_while_memory_is_not_short_unmaps_nothing) {
  core_start("expandable_segments:true");
  void *p[40];
  uint64_t rng = 7;
  for (int i = 0; i < 40; i++)
    cr_assert_eq(cudalloc_malloc(&p[i], (size_t)(1 + rng_next(&rng) % 24) * MiB + 4096, 0), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.backend_unmap.total, 0);
  cr_assert_eq(s.num_page_moves.total, 0);
  cr_assert_leq(s.backend_create.total, 40, "at most one create per growth");
  cr_assert_gt(s.backend_map.total, 4 * s.backend_create.total, "%lld creates for %lld pages",
               (long long)s.backend_create.total, (long long)s.backend_map.total);
  CHECK_CONSISTENT();
  for (int i = 0; i < 40; i++) cudalloc_free(p[i], 0);
}

/* 32 MiB freed (its pages mapped, free) with a live block after it, then
 * 64 MiB asked: it fits in no free block, and creating all of it would
 * reserve 98 MiB for 66 MiB of blocks, so the free pages move first and
 * only the rest is created. */
Test(core_chunks, pages_move_when_reserved_would_pass_the_slack) {
  core_start("expandable_segments:true,sim_events:auto");
  void *a, *c, *b;
  cr_assert_eq(cudalloc_malloc(&a, 32 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&c, 2 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 64 * MiB, 0), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_page_moves.total, (int64_t)pages(32 * MiB), "%lld moves, reserved %lld, creates %lld",
               (long long)s.num_page_moves.total, (long long)s.reserved_bytes.current, (long long)s.backend_create.total);
  cr_assert_eq(s.reserved_bytes.current, (int64_t)(66 * MiB));
  CHECK_CONSISTENT();
  cudalloc_free(b, 0);
  cudalloc_free(c, 0);
}

/* A chunk of which a page is still mapped stays: the driver frees a
 * handle whole. a's chunk (4 pages) ends up half under a1, half moved
 * into b; once b is freed, b's own chunk goes back and a's stays until a1
 * is freed too. */
Test(core_chunks, a_chunk_goes_back_to_the_driver_only_whole) {
  core_start("expandable_segments:true,sim_events:auto");
  void *a, *c, *a1, *b;
  cr_assert_eq(cudalloc_malloc(&a, 8 * MiB, 0), cudaSuccess);   /* one chunk of 4 pages */
  cr_assert_eq(cudalloc_malloc(&c, 2 * MiB, 0), cudaSuccess);   /* keeps a from growing in place */
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&a1, 3 * MiB, 0), cudaSuccess);  /* a's first 2 pages */
  cr_assert_eq(a1, a);
  cr_assert_eq(cudalloc_malloc(&b, 12 * MiB, 0), cudaSuccess);  /* a's last 2 pages move here */
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_page_moves.total, 2, "%lld moves", (long long)s.num_page_moves.total);
  cudalloc_free_sync(b);
  cudalloc_empty_cache();
  s = stats0();
  cr_assert_eq(s.backend_release.total, 1, "b's own chunk went back, a's (half mapped under a1) stayed");
  cr_assert_eq(s.reserved_bytes.current, (int64_t)(8 * MiB + 2 * MiB), "a's whole chunk and c's: %lld, releases %lld, creates %lld", (long long)s.reserved_bytes.current, (long long)s.backend_release.total, (long long)s.backend_create.total);
  CHECK_CONSISTENT();
  cudalloc_free_sync(a1);
  cudalloc_free_sync(c);
  cudalloc_empty_cache();
  s = stats0();
  cr_assert_eq(s.reserved_bytes.current, 0);
  cr_assert_eq(s.backend_release.total, s.backend_create.total, "every chunk went back, once");
  cr_assert_eq(ca_sim_physical_used(0), 0);
  CHECK_CONSISTENT();
}
