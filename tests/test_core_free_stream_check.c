/* A stream-ordered free's stream check, answered by the stream's queue
 * (fence.h, ca_queue_check_stream): the stamp of the queue's last check
 * holds only under the streamdev generation it was made in, so a stream
 * destroyed behind cudalloc's back is refused by the first free after any
 * change the shim reports (here another stream's creation), as the
 * backend would refuse it, and the block stays the program's. The twin
 * test trusts the stamp whatever the generation (queue_check_any_gen) and
 * shows that the check then lets the dead stream through. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("destroys a stream behind cudalloc's back"); }
TestSuite(core_free_stream_check, .init = sim_only, .fini = core_fini);

/* 1 MiB + 1: the core frees it (above the front cache's sizes). */
#define BIG (MiB + 1)

/* Frees on s after s was destroyed unseen and another stream was created
 * (seen): true when the free was refused with the block still live. */
static bool dead_stream_free_is_refused(bool any_gen) {
  core_start("sim_events:auto");
  ca_debug.queue_check_any_gen = any_gen;
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  void *p = NULL, *q = NULL;
  for (int i = 0; i < 2; i++) {   /* the first free makes the queue, the second stamps it */
    cr_assert_eq(cudalloc_malloc(&p, BIG, (cudaStream_t)s), cudaSuccess);
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
  }
  cr_assert_eq(cudalloc_malloc(&q, BIG, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);   /* cudalloc is not told */
  ca_stream_created(test_stream(true), true);             /* the generation moves */
  cudaError_t rc = cudalloc_free(q, (cudaStream_t)s);
  cudalloc_stats_t st;
  cr_assert_eq(cudalloc_get_stats(0, &st), cudaSuccess);
  bool live = st.num_live_blocks.current == 1;
  if (rc != cudaSuccess) cr_assert_eq(cudalloc_free_sync(q), cudaSuccess, "the refused block is still the program's");
  return rc == cudaErrorInvalidResourceHandle && live;
}

Test(core_free_stream_check, a_free_on_a_stream_destroyed_unseen_is_refused_after_a_change) {
  cr_assert(dead_stream_free_is_refused(false));
}

Test(core_free_stream_check, a_stamp_trusted_through_changes_is_caught) {
  cr_assert_not(dead_stream_free_is_refused(true), "with the stamp trusted, the dead stream's free goes through");
}
