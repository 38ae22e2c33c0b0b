/* A synchronization of the whole device (cudaDeviceSynchronize, through
 * ca_device_sync_begin/end) proves that every block freed before it is
 * done with: cudaFree'd blocks come back with no event recorded or
 * queried. Nothing filed for a synchronization may be taken before it
 * returns (a poll meanwhile, a failed synchronization): the reuse oracle
 * checks it, and a test-only switch that breaks the guard is caught. */
#include "core_testing.h"

TestSuite(core_sync, .fini = core_fini);

/* Every test here is about cudaFree's fence, which a program with a
 * stream besides the legacy one gets: legacy_queue:off (with the legacy
 * queue, test_core_legacy_queue.c, no block waits at all). */

static void sim_only(void) { SKIP_ON_CUDA("the simulated device's kernels are touches"); }

static int64_t event_calls(void) {
  cudalloc_stats_t s = stats0();
  return s.backend_event_record.total + s.backend_event_query.total + s.backend_sync.total;
}

static int64_t pending(void) {
  cudalloc_stats_t s = stats0();
  return s.active_bytes.current - s.allocated_bytes.current;
}

/* A block a kernel on the legacy stream still writes, cudaFree'd. */
static void *freed_in_flight(size_t size) {
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, size, 0), cudaSuccess);
  cr_assert_eq(ca_sim_touch(CA_STREAM_LEGACY, p, size, 1), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(pending(), (int64_t)size);
  return p;
}

Test(core_sync, a_device_synchronization_returns_freed_blocks_with_no_event, .init = sim_only) {
  core_start("sim_events:manual,legacy_queue:off");
  void *p = freed_in_flight(4 << 20);
  int64_t calls = event_calls();
  ca_sync_token_t t = ca_device_sync_begin();
  cr_assert_eq(ca_state.be->device_sync(0), CUDA_SUCCESS);   /* what cudaDeviceSynchronize does */
  ca_device_sync_end(t, true);
  cr_assert_eq(pending(), 0, "the block is reusable by every stream");
  cr_assert_eq(event_calls(), calls, "no event recorded, queried or waited for");
  void *q;
  cr_assert_eq(cudalloc_malloc(&q, 4 << 20, 0), cudaSuccess);
  cr_assert_eq(q, p, "handed out again at once");
  CHECK_CONSISTENT();
  cudalloc_free_sync(q);
}

/* Before the synchronization returns, a slow path polls: the filed block
 * must not come back (its kernel still runs). */
static uint64_t violations_when_polled_during_sync(bool break_guard) {
  core_start("sim_events:manual,legacy_queue:off");
  ca_debug.sync_fences_done_early = break_guard;
  void *p = freed_in_flight(4 << 20);
  ca_sync_token_t t = ca_device_sync_begin();
  void *q;
  capture_t cap;
  char out[2048];
  capture_begin(&cap);   /* a violation is printed: kept out of make test */
  /* as cudaMalloc: usable by every stream at once */
  cr_assert_eq(ca_malloc_on(0, &q, 4 << 20, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
  capture_end(&cap, out, sizeof out);
  uint64_t v = ca_sim_oracle_violations();
  cr_assert_eq(q == p, break_guard, "the filed block came back before the synchronization returned: %d", q == p);
  ca_sim_oracle_reset();
  cr_assert_eq(ca_state.be->device_sync(0), CUDA_SUCCESS);
  ca_device_sync_end(t, true);
  cudalloc_free_sync(q);
  ca_debug.sync_fences_done_early = false;
  return v;
}

Test(core_sync, nothing_filed_comes_back_before_the_synchronization_returns, .init = sim_only) {
  cr_assert_eq(violations_when_polled_during_sync(false), 0);
}

/* The guard broken: the oracle catches the early reuse. */
Test(core_sync, the_oracle_catches_a_filed_block_taken_early, .init = sim_only) {
  cr_assert_eq(violations_when_polled_during_sync(true), 1);
}

/* A synchronization that failed proves nothing: the block waits for the
 * events of the next seal, which complete with its kernel. */
Test(core_sync, a_failed_synchronization_proves_nothing, .init = sim_only) {
  core_start("sim_events:manual,legacy_queue:off");
  void *p = freed_in_flight(4 << 20);
  ca_sync_token_t t = ca_device_sync_begin();
  ca_device_sync_end(t, false);
  cr_assert_eq(pending(), 4 << 20);
  cudalloc_step();   /* seals: events recorded behind the kernel */
  cr_assert_eq(pending(), 4 << 20, "the kernel still runs");
  ca_sim_stream_complete(CA_STREAM_LEGACY);
  cudalloc_step();
  cr_assert_eq(pending(), 0);
  void *q;
  cr_assert_eq(cudalloc_malloc(&q, 4 << 20, 0), cudaSuccess);
  cr_assert_eq(q, p);
  CHECK_CONSISTENT();
  cudalloc_free_sync(q);
}

/* Stream-ordered frees on a non-blocking stream are covered too, and a
 * free made after the synchronization began is not (x keeps a and b
 * apart: pending neighbours on one stream merge, and the merged block
 * would wait for the later free). */
Test(core_sync, only_what_was_freed_before_the_synchronization_is_released, .init = sim_only) {
  core_start("sim_events:manual,legacy_queue:off");
  ca_stream_t s = test_stream(true);
  void *a, *x, *b;
  cr_assert_eq(cudalloc_malloc(&a, 1 << 20, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&x, 1 << 20, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 1 << 20, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(ca_sim_touch(s, a, 1 << 20, 1), CUDA_SUCCESS);
  cr_assert_eq(ca_sim_touch(s, b, 1 << 20, 1), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_free(a, (cudaStream_t)s), cudaSuccess);
  ca_sync_token_t t = ca_device_sync_begin();
  cr_assert_eq(cudalloc_free(b, (cudaStream_t)s), cudaSuccess);   /* freed while it runs (another thread) */
  cr_assert_eq(ca_sim_touch(s, b, 1 << 20, 1), CUDA_SUCCESS);      /* and used after, on its stream */
  ca_sim_stream_complete(s);
  cr_assert_eq(ca_state.be->device_sync(0), CUDA_SUCCESS);
  ca_device_sync_end(t, true);
  cr_assert_eq(pending(), 1 << 20, "b was freed after the synchronization began (pending %lld)", (long long)pending());
  CHECK_CONSISTENT();
  cudalloc_free(x, (cudaStream_t)s);
}
