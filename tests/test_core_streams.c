/* Stream safety with manual events: freed memory is never handed out while
 * device work issued before the free may still touch it. Each guard has a
 * twin test that breaks it (a test-only switch, or a step left out) and
 * shows that the property check then fails. */
#include "core_testing.h"

#include <pthread.h>

/* Every test here completes streams by hand: simulated device only. */
static void sim_only(void) { SKIP_ON_CUDA("events completed by the test"); }
TestSuite(core_streams, .init = sim_only, .fini = core_fini);

static void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess);
  return p;
}

static ca_stream_t new_stream(bool nonblocking, bool tell_allocator) {
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, nonblocking), CUDA_SUCCESS);
  if (tell_allocator) ca_stream_created(s, nonblocking);
  return s;
}

Test(core_streams, a_stream_reuses_its_own_frees_at_once) {
  core_start("sim_events:manual");
  ca_stream_t a = new_stream(false, true);
  void *p = alloc_on(MiB + 7, a);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)a), cudaSuccess);
  cr_assert_eq(alloc_on(MiB + 7, a), p, "work on one stream is ordered: no wait needed");
  cr_assert_eq(stats0().backend_event_record.total, 0, "and no event was needed either");
  CHECK_CONSISTENT();
}

/* Frees p on A, then asks for the same size on B before and after A's work
 * completes. Returns true when B never got p too early. 8 MiB hold two such
 * blocks: the third request finds memory short, and takes p (while memory
 * is not short B would grow instead, alloc/settle.c). */
static bool cross_stream_reuse_is_safe(bool break_guard) {
  core_start("sim_events:manual,sim_capacity_mb:8");
  ca_debug.reuse_pending_anywhere = break_guard;
  ca_stream_t a = new_stream(false, true), b = new_stream(false, true);
  void *p = alloc_on(3 * MiB, a);
  cudalloc_free(p, (cudaStream_t)a);
  void *early = alloc_on(3 * MiB, b);
  bool safe = early != p;
  ca_sim_stream_complete(a);
  void *later = alloc_on(3 * MiB, b);
  cr_assert_eq(cudalloc_check(), 0);
  if (safe) cr_assert_eq(later, p, "once A's event completed, B reuses the block");
  return safe;
}

Test(core_streams, another_stream_waits_for_the_event) { cr_assert(cross_stream_reuse_is_safe(false)); }

Test(core_streams, broken_stream_guard_is_caught) {
  cr_assert_not(cross_stream_reuse_is_safe(true), "with the guard off, B gets A's block while A may use it");
}

/* cudaFree's promise across the legacy stream and a non-blocking stream. */
static bool free_sync_waits_for_all_work(bool skip_fences, bool register_stream) {
  core_start("sim_events:manual");
  ca_debug.skip_fences = skip_fences;
  ca_stream_t nb = new_stream(true, register_stream);
  void *p = alloc_on(5 * MiB, NULL);
  TOUCH(nb, p, MiB, true);   /* a kernel on nb still uses p (an idle nb needs no wait) */
  cudalloc_free_sync(p);
  capture_t cap;   /* the oracle's line, when it fires */
  capture_begin(&cap);
  bool safe = alloc_on(5 * MiB, NULL) != p;
  ca_sim_stream_complete(NULL);   /* the legacy stream is done, nb is not */
  safe = safe && alloc_on(5 * MiB, NULL) != p;
  char out[1024];
  capture_end(&cap, out, sizeof out);
  ca_sim_stream_complete(nb);
  void *later = alloc_on(5 * MiB, NULL);
  cr_assert_eq(cudalloc_check(), 0);
  if (safe) cr_assert_eq(later, p, "after all work completed the block is reused");
  if (!safe) {   /* the oracle agrees: p was handed out under nb's kernel */
    cr_assert_gt(ca_sim_oracle_violations(), 0, "the reuse oracle missed the early reuse");
    ca_sim_oracle_reset();
  }
  return safe;
}

Test(core_streams, free_sync_waits_for_every_stream) { cr_assert(free_sync_waits_for_all_work(false, true)); }

Test(core_streams, free_sync_without_fences_is_caught) {
  cr_assert_not(free_sync_waits_for_all_work(true, true), "skipping fences hands the block out at once");
}

Test(core_streams, free_sync_needs_to_know_nonblocking_streams) {
  cr_assert_not(free_sync_waits_for_all_work(false, false),
                "an unregistered non-blocking stream is not fenced: why the shim reports stream creation");
}

/* The legacy stream's event covers earlier work on blocking streams: the
 * simulated legacy stream, like a GPU's, cannot finish before it. */
Test(core_streams, legacy_fence_covers_blocking_streams) {
  core_start("sim_events:manual");
  ca_stream_t s = new_stream(false, true);
  ca_event_t work;
  cr_assert_eq(ca_backend_sim.event_create(0, &work), CUDA_SUCCESS);
  cr_assert_eq(ca_backend_sim.event_record(work, s), CUDA_SUCCESS);   /* work queued on s */
  void *p = alloc_on(5 * MiB, NULL);
  cudalloc_free_sync(p);
  cr_assert_neq(alloc_on(5 * MiB, NULL), p);
  ca_sim_stream_complete(s);
  cr_assert_neq(alloc_on(5 * MiB, NULL), p, "s is done but the legacy stream is not");
  ca_sim_stream_complete(NULL);
  cr_assert_eq(ca_backend_sim.event_query(work), CUDA_SUCCESS);
  cr_assert_eq(alloc_on(5 * MiB, NULL), p);
  ca_backend_sim.event_destroy(work);
  CHECK_CONSISTENT();
}

Test(core_streams, no_head_of_line_blocking) {
  core_start("sim_events:manual");
  ca_stream_t a = new_stream(false, true), b = new_stream(false, true), c = new_stream(false, true);
  void *pa = alloc_on(4 * MiB, a), *pb = alloc_on(4 * MiB, b);
  cudalloc_free(pa, (cudaStream_t)a);
  cudalloc_free(pb, (cudaStream_t)b);
  seal_and_poll();                 /* seal both */
  ca_sim_stream_complete(b);       /* a stays busy */
  void *got = alloc_on(4 * MiB, c);
  cr_assert_eq(got, pb, "b's block is free although a's older one is still pending");
  CHECK_CONSISTENT();
}

Test(core_streams, same_stream_frees_merge) {
  core_start("sim_events:manual");
  ca_stream_t a = new_stream(false, true);
  char *x = alloc_on(MiB * 2, a), *y = alloc_on(MiB * 2, a);
  cr_assert_eq(y, x + 2 * MiB, "neighbours");
  cudalloc_free(x, (cudaStream_t)a);
  cudalloc_free(y, (cudaStream_t)a);
  CHECK_CONSISTENT();
  cr_assert_eq(alloc_on(4 * MiB, a), x, "the two pending blocks serve one larger request on a");
  CHECK_CONSISTENT();
}

Test(core_streams, destroyed_stream_blocks_wait_for_its_work) {
  core_start("sim_events:manual");
  ca_stream_t a = new_stream(false, true);
  void *p = alloc_on(3 * MiB, a);
  cudalloc_free(p, (cudaStream_t)a);
  ca_stream_destroyed(a);
  /* A new stream may get the same handle value: it must not inherit p. */
  cr_assert_neq(alloc_on(3 * MiB, a), p);
  CHECK_CONSISTENT();
  ca_sim_stream_complete(a);
  cr_assert_eq(alloc_on(3 * MiB, NULL), p);
  CHECK_CONSISTENT();
}

Test(core_streams, captures_hold_frees_and_never_wait) {
  core_start("sim_events:manual,sim_capacity_mb:16");
  void *p = alloc_on(6 * MiB, NULL), *q = alloc_on(6 * MiB, NULL);
  int64_t records = stats0().backend_event_record.total;
  ca_capture_begin();
  cudalloc_free_sync(p);
  void *r = NULL;
  capture_t cap;
  char err[4096];
  capture_begin(&cap);
  cr_assert_eq(cudalloc_malloc(&r, 6 * MiB, 0), cudaErrorMemoryAllocation,
               "during a capture the allocator fails rather than waits");
  capture_end(&cap, err, sizeof err);
  cr_assert_not_null(strstr(err, "(6.0 MiB): pending\ncudalloc:   hint: a graph capture forbids waiting"), "%s", err);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.backend_event_record.total, records, "no event recorded during a capture");
  cr_assert_eq(s.num_waits.total, 0);
  cr_assert_eq(s.backend_sync.total, 0);
  ca_capture_end();
  cr_assert_eq(cudalloc_malloc(&r, 6 * MiB, 0), cudaSuccess, "after the capture the held free is usable");
  cr_assert_eq(r, p);
  cr_assert_gt(stats0().num_waits.total, 0, "by waiting for its work, as nothing else was free");
  cudalloc_free_sync(q);
  CHECK_CONSISTENT();
}

Test(core_streams, free_mode_stream_reuses_on_the_allocation_stream) {
  core_start("sim_events:manual,free_mode:stream");
  ca_stream_t a = new_stream(false, true);
  void *p = alloc_on(3 * MiB, a);
  cudalloc_free_sync(p);
  cr_assert_eq(alloc_on(3 * MiB, a), p, "PyTorch's contract: reuse on the allocation stream at once");
  void *p2 = alloc_on(3 * MiB, a);
  cudalloc_free_sync(p2);
  cr_assert_neq(alloc_on(3 * MiB, NULL), p2, "but not on another stream before the event");
}

/* Each thread's per-thread default stream is its own stream, although all
 * are named 0x2: a block another thread freed on its per-thread stream is
 * not reused at once. */
typedef struct handoff_s {
  void *p;
} handoff_t;

static void *free_on_my_per_thread_stream(void *arg) {
  handoff_t *h = arg;
  ca_backend_sim.set_device(0);
  cr_assert_eq(cudalloc_free(h->p, cudaStreamPerThread), cudaSuccess);
  return NULL;
}

/* 8 MiB: memory is short at the third block, so the later request takes
 * the other thread's block rather than growing (alloc/settle.c). */
static bool per_thread_streams_are_apart(bool shared) {
  core_start("sim_events:manual,sim_capacity_mb:8");
  ca_debug.shared_per_thread = shared;
  handoff_t h = {alloc_on(3 * MiB, CA_STREAM_PER_THREAD)};
  pthread_t t;
  pthread_create(&t, NULL, free_on_my_per_thread_stream, &h);
  pthread_join(t, NULL);
  void *mine = alloc_on(3 * MiB, CA_STREAM_PER_THREAD);
  bool apart = mine != h.p;
  ca_sim_complete_all();
  cudalloc_step();      /* the fence is recorded now; complete it too */
  ca_sim_complete_all();
  void *later = alloc_on(3 * MiB, CA_STREAM_PER_THREAD);
  if (apart) cr_assert_eq(later, h.p, "reused once the other thread's work is done");
  CHECK_CONSISTENT();
  return apart;
}

Test(core_streams, per_thread_streams_of_two_threads_are_two_streams) {
  cr_assert(per_thread_streams_are_apart(false));
}

Test(core_streams, one_queue_for_all_per_thread_streams_is_caught) {
  cr_assert_not(per_thread_streams_are_apart(true), "sharing the queue hands the block over at once");
}
