/* Block structs outlive every pointer to them: the front cache remembers
 * the blocks a thread holds by (address, struct) and may read an entry's
 * struct long after the block was freed through the core (alloc/tcache.c,
 * stale()), so the core recycles structs (d->spare_blocks) and frees them
 * only when the device goes. Before segments.c recycled the structs of a
 * classic segment it gave back, this test read freed memory: under ASan,
 * a heap-use-after-free in stale() (tcache.c) from ca_tcache_remember,
 * the struct freed by ca_segment_teardown; the plain build reads it
 * silently, so the ASan run is the check. */
#include "core_testing.h"

TestSuite(core_block_structs, .fini = core_fini);

#define N 2048   /* 4 KiB blocks over 8 MiB: eight times round the held table's first way (1 MiB) */

/* Frees everything through the core and gives every segment back. */
static void free_all_and_empty(void **p, int n, int round) {
  for (int i = 0; i < n; i++) cr_assert_eq(cudalloc_free_sync(p[i]), cudaSuccess);   /* the core's free */
  cudalloc_step();   /* seals cudaFree's queue */
  if (!test_on_cuda()) ca_sim_complete_all();
  cudalloc_empty_cache();   /* every classic segment goes back, with its block structs */
  cr_assert_eq(stats0().reserved_bytes.current, 0, "round %d: every segment was given back", round);
}

/* Round 1's 4 KiB blocks are remembered, freed, merged into one block per
 * segment (the leftmost struct, which the cache remembers, survives) and
 * given back. Round 2 starts with a 1 MiB block (not the cache's), so its
 * 4 KiB blocks land at other addresses: their entries probe the entries that
 * hold round 1's entries, and read their structs. */
Test(core_block_structs, the_thread_caches_entries_never_name_a_freed_struct) {
  core_start("expandable_segments:false");
  ca_stream_t s = test_stream(false);
  static void *p[N + 1];
  for (int i = 0; i < N; i++) cr_assert_eq(cudalloc_malloc(&p[i], 4096, (cudaStream_t)s), cudaSuccess);
  free_all_and_empty(p, N, 1);
  for (int i = 0; i <= N; i++) cr_assert_eq(cudalloc_malloc(&p[i], i ? 4096 : MiB, (cudaStream_t)s), cudaSuccess);
  free_all_and_empty(p, N + 1, 2);
  CHECK_CONSISTENT();
}
