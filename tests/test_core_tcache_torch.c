/* PyTorch's pluggable allocator and the front cache (alloc.c
 * ca_malloc_torch, ca_free_torch): by default PyTorch's frees keep
 * cudaFree's promise and never reach a front cache, so its allocations
 * neither try the cache nor claim their blocks for it; with
 * torch_free:stream its frees are stream-ordered and both happen. */
#include "tcache_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's counters"); }
TestSuite(core_tcache_torch, .init = sim_only, .fini = tcache_fini);

#define SMALL 4096

/* Ten pairs through PyTorch's entry points on s; how many blocks the core
 * claimed for a front cache, and how many hits the cache gave. */
typedef struct {
  uint64_t claims, hits;
} cache_use_t;

static cache_use_t torch_pairs(ca_stream_t s) {
  cache_use_t before = {ca_debug.tcache_claims, ca_debug.tcache_hits};
  for (int i = 0; i < 10; i++) {
    void *p = NULL;
    cr_assert_eq(ca_malloc_torch(0, &p, SMALL, s, NULL), CUDA_SUCCESS);
    cr_assert_not_null(p);
    cr_assert_eq(ca_free_torch(p, s), CUDA_SUCCESS);
  }
  return (cache_use_t){ca_debug.tcache_claims - before.claims, ca_debug.tcache_hits - before.hits};
}

/* Input tried: the default torch_free. On the code before ca_malloc_torch
 * (the allocation as cudaMallocAsync's) every block was claimed. */
Test(core_tcache_torch, default_frees_wait_so_no_block_is_claimed) {
  core_start("track:caller,sim_events:auto");
  cache_use_t use = torch_pairs(new_stream());
  cr_assert_eq(use.claims, 0, "%llu blocks claimed for a cache their frees never reach", (unsigned long long)use.claims);
  cr_assert_eq(use.hits, 0);
  cudalloc_stats_t st = stats0();
  cr_assert_eq(st.num_allocs.total, 10);
  cr_assert_eq(st.num_frees.total, 10);
  cr_assert_eq(st.allocated_bytes.current, 0);
  CHECK_CONSISTENT();
}

/* Input tried: torch_free:stream. The tally sees claims: the test above
 * would see them too. */
Test(core_tcache_torch, stream_frees_are_cached_so_blocks_are_claimed) {
  core_start("track:caller,sim_events:auto,torch_free:stream");
  cache_use_t use = torch_pairs(new_stream());
  cr_assert_geq(use.claims, 1, "the first block comes from the core, claimed");
  cr_assert_eq(use.hits, 10 - use.claims, "every later pair hits the block freed before it");
  CHECK_CONSISTENT();
}
