/* The device of a stream, remembered per thread (alloc/streamdev.c): the
 * hot path asks the backend nothing, and every change that can make a
 * remembered answer wrong is seen. Each guard has a twin test with
 * stale_stream_devices, which keeps the answers through every change. */
#include "core_testing.h"

static void sim_only(void) { SKIP_ON_CUDA("counts the simulated device's calls"); }
TestSuite(core_streamdev, .init = sim_only, .fini = core_fini);

static uint64_t lookups(void) { return ca_sim_calls(CA_OP_stream_device) + ca_sim_calls(CA_OP_get_device); }

static void pairs(ca_stream_t s, bool ordered, int n) {
  for (int i = 0; i < n; i++) {
    void *p = NULL;
    if (ordered) {
      cr_assert_eq(cudalloc_malloc(&p, 4096, (cudaStream_t)s), cudaSuccess);
      cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
    } else {
      cr_assert_eq(ca_malloc(&p, 4096, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
      cr_assert_eq(ca_free_sync(p), CUDA_SUCCESS);
    }
  }
}

/* Before the cache this failed with 400 lookups for the 300 pairs: one
 * stream_device call per allocation and per stream-ordered free. */
Test(core_streamdev, cached_pairs_ask_the_backend_for_no_device) {
  core_start("sim_events:auto");
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  pairs(s, true, 1);
  pairs(NULL, false, 1);
  uint64_t before = lookups();
  pairs(s, true, 100);
  pairs(CA_STREAM_PER_THREAD, true, 100);
  pairs(NULL, false, 100);
  cr_assert_eq(lookups() - before, 0, "no lookup after the first pairs (%llu)",
               (unsigned long long)(lookups() - before));
  CHECK_CONSISTENT();
}

/* Allocates on a stream the program destroyed (and the shim saw it):
 * true when the call was refused, as the backend refuses the handle. */
static bool destroyed_stream_is_refused(bool stale) {
  core_start("sim_events:auto");
  ca_debug.stale_stream_devices = stale;
  ca_stream_t s = test_stream(true);
  ca_stream_created(s, true);
  pairs(s, true, 2);
  ca_stream_destroyed(s);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);
  void *p = NULL;
  cudaError_t rc = cudalloc_malloc(&p, 4096, (cudaStream_t)s);
  if (rc == cudaSuccess) cudalloc_free_sync(p);
  return rc == cudaErrorInvalidResourceHandle;
}

Test(core_streamdev, a_destroyed_stream_is_refused) { cr_assert(destroyed_stream_is_refused(false)); }

Test(core_streamdev, stale_answers_are_caught_by_the_destroyed_stream_test) {
  cr_assert_not(destroyed_stream_is_refused(true), "with answers kept, the dead handle is served");
}

/* cudaSetDevice between two cudaMallocs: true when the second one went to
 * the newly current device. */
static bool set_device_moves_the_default_streams(bool stale) {
  core_start("sim_events:auto,sim_devices:2");
  ca_debug.stale_stream_devices = stale;
  void *p = NULL, *q = NULL;
  cr_assert_eq(cudalloc_malloc(&p, 4096, NULL), cudaSuccess);
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_malloc(&q, 4096, NULL), cudaSuccess);
  cudalloc_stats_t s1;
  cr_assert_eq(cudalloc_get_stats(1, &s1), cudaSuccess);
  cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);
  cr_assert_eq(cudalloc_free(q, NULL), cudaSuccess);
  return s1.num_live_blocks.current == 1;
}

Test(core_streamdev, set_device_is_seen_through_the_context) { cr_assert(set_device_moves_the_default_streams(false)); }

Test(core_streamdev, stale_context_is_caught_by_the_set_device_test) {
  cr_assert_not(set_device_moves_the_default_streams(true), "with the context ignored, device 0 serves it");
}
