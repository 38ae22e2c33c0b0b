/* Merges in place (alloc/fence.c, ca_queue_add): a freed block that merges
 * with a pending neighbour keeps the neighbour's struct, and the merged
 * block must join the open batch, the latest of the queue's fences: under
 * the neighbour's older fence, the freed part would be released when that
 * fence completes, while work issued after it may still touch the part.
 * The twin with merge_keeps_old_fence shows the reuse oracle catching it. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("switches the simulated device's event mode"); }
TestSuite(core_merge, .init = sim_only, .fini = core_fini);

#define SIZE (2 * MiB)   /* the large pool, past the front cache */

/* Records events for the open batches, as the start of a slow path does,
 * without looking at what completed. */
static void seal_only(void) {
  ca_device_t *d = dev0();
  ca_devlock_take(&d->lock);
  ca_fences_seal(d);
  ca_devlock_release(&d->lock);
}

static void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess);
  return p;
}

/* Returns true when the merged block was not handed to another stream
 * while a kernel on its own stream still wrote the freed part. */
static bool merged_block_waits_for_the_latest_work(bool keep_old_fence) {
  core_start("sim_events:auto,thread_cache_kb:0");
  ca_debug.merge_keeps_old_fence = keep_old_fence;
  ca_stream_t s = test_stream(false), t = test_stream(false);
  char *a = alloc_on(SIZE, s), *b = alloc_on(SIZE, s);
  cr_assert_eq(b, a + SIZE, "b follows a: they can merge");
  cr_assert_eq(cudalloc_free(a, (cudaStream_t)s), cudaSuccess);
  seal_only();   /* a waits under a sealed fence of s whose event (auto mode) is complete, unpolled */
  cr_assert_eq(dev0()->stats.num_frees.current, 1);
  ca_sim_set_events(CA_SIM_EVENTS_MANUAL, 0);
  TOUCH(s, b, SIZE, true);   /* a kernel on s writes b, after a's fence */
  cr_assert_eq(cudalloc_free(b, (cudaStream_t)s), cudaSuccess);   /* merges into a's struct */
  seal_and_poll();   /* as a slow path does: what completed is free for every stream */
  capture_t cap;   /* the oracle's line, when it fires */
  capture_begin(&cap);
  char *got = alloc_on(2 * SIZE, t);   /* the exact fit, if a+b were free */
  char out[1024];
  capture_end(&cap, out, sizeof out);
  bool safe = got != a;
  cr_assert_eq(cudalloc_check(), 0);
  if (!safe) {   /* the oracle agrees: b's bytes went to t under s's kernel */
    cr_assert_gt(ca_sim_oracle_violations(), 0, "the reuse oracle missed the early reuse");
    ca_sim_oracle_reset();
  }
  ca_debug.merge_keeps_old_fence = false;
  ca_sim_complete_all();
  return safe;
}

Test(core_merge, a_merged_block_joins_the_latest_fence) { cr_assert(merged_block_waits_for_the_latest_work(false)); }

Test(core_merge, a_merge_left_under_the_older_fence_is_caught) {
  cr_assert_not(merged_block_waits_for_the_latest_work(true), "the freed part is released with the older fence");
}
