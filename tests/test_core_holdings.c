/* The holdings dump (alloc/holdings.c, cudalloc-replay --dump-peak): where
 * reserved memory is, pending memory named in its stream's queue. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("device work is simulated"); }

TestSuite(core_holdings, .init = sim_only, .fini = core_fini);

static char *dump(void) {
  static char buf[8192];
  FILE *f = fmemopen(buf, sizeof buf, "w");
  cr_assert_not_null(f);
  cr_assert_eq(ca_holdings_dump(0, f), CUDA_SUCCESS);
  fclose(f);
  return buf;
}

/* 8 MiB freed on a stream and 4 MiB with cudaFree, their work not done:
 * pending, the first open in its stream's queue and reusable on it, the
 * second open in the epoch queue. */
Test(core_holdings, names_pending_memory_in_its_queue) {
  core_start("expandable_segments:true,sim_events:manual");
  ca_stream_t s = test_stream(true);
  void *p, *q, *live;
  cr_assert_eq(cudalloc_malloc(&p, 8 * MiB, s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&live, 2 * MiB, s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&q, 4 * MiB, NULL), cudaSuccess);
  TOUCH(s, p, 8 * MiB, true);
  cr_assert_eq(cudalloc_free(p, s), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(q), cudaSuccess);
  char want[160];
  const char *text = dump();
  cr_assert(strstr(text, "allocated 2.0 MiB"), "%s", text);
  cr_assert(strstr(text, "pending 12.0 MiB"), "%s", text);
  cr_assert(strstr(text, "epoch queue (cudaFree): open 4.0 MiB"), "%s", text);
  snprintf(want, sizeof want, "queue of stream %p: open 8.0 MiB, sealed 0.0 MiB in 0 fences; reusable on its stream 8.0 MiB",
           (void *)s);
  cr_assert(strstr(text, want), "no \"%s\" in:\n%s", want, text);
  cudalloc_free(live, s);
}

/* 8 MiB freed and done, then a small block whose pool's first page moves
 * out of it (memory is short by the slack): 6 MiB free in one block of
 * the large pool, in the class of blocks from 4 MiB. */
Test(core_holdings, names_free_memory_by_size) {
  core_start("expandable_segments:true,sim_events:auto");
  void *p, *live, *small;
  cr_assert_eq(cudalloc_malloc(&p, 8 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&live, 2 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free(p, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&small, 1024, 0), cudaSuccess);
  const char *text = dump();
  cr_assert(strstr(text, "large pool: free 6.0 MiB in 1 blocks (largest 6.00 MiB)"), "%s", text);
  cr_assert(strstr(text, ">=4096 KiB: 6.0 MiB;"), "%s", text);
  cudalloc_free(small, 0);
  cudalloc_free(live, 0);
}

/* A device cudalloc does not know: an error, nothing written. */
Test(core_holdings, a_bad_device_is_refused) {
  core_start("expandable_segments:true");
  char *text = dump();
  cr_assert(strstr(text, "device 0:"), "%s", text);
  cr_assert_neq(ca_holdings_dump(7, stdout), CUDA_SUCCESS);
}
