/* Regressions of issue 9 (premature reuse and lost memory around streams),
 * on the simulated device with manual events: the test decides when device
 * work completes, so memory stays pending as long as it would on a GPU.
 *
 * Each test names the defect and says how it failed on the code before the
 * fix (run against it, with the calls spelled as they were then). */
#include "core_testing.h"

#include <pthread.h>

static void sim_only(void) { SKIP_ON_CUDA("events completed by the test"); }
TestSuite(core_stream_regressions, .init = sim_only, .fini = core_fini);

/* An allocation that is not stream-ordered (cudaMalloc's). */
static void *alloc_sync(size_t size) {
  void *p = NULL;
  cr_assert_eq(ca_malloc(&p, size, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
  return p;
}

static void *alloc_on(size_t size, ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, (cudaStream_t)s), cudaSuccess);
  return p;
}

/* Device work queued on s now: an event recorded on it, pending until the
 * test completes s. */
static ca_event_t work_on(int dev, ca_stream_t s) {
  ca_event_t e;
  cr_assert_eq(ca_backend_sim.event_create(dev, &e), CUDA_SUCCESS);
  cr_assert_eq(ca_backend_sim.event_record(e, s), CUDA_SUCCESS);
  return e;
}

static bool pending(ca_event_t work) { return ca_backend_sim.event_query(work) == CUDA_ERROR_NOT_READY; }

static cudalloc_stats_t stats_of(int dev) {
  cudalloc_stats_t s;
  cr_assert_eq(cudalloc_get_stats(dev, &s), cudaSuccess);
  return s;
}

// ----------------------------------------------------------------------------
// free_mode:stream: cudaFree of a block another thread allocated on its
// per-thread default stream
// ----------------------------------------------------------------------------

typedef struct per_thread_s {
  void *p;
  ca_event_t work;
} per_thread_t;

static void *allocate_and_leave_work(void *arg) {
  per_thread_t *a = arg;
  a->p = alloc_on(3 * MiB, CA_STREAM_PER_THREAD);
  a->work = work_on(0, CA_STREAM_PER_THREAD);   /* a kernel on A's stream uses p */
  return NULL;
}

/* Before the fix: B got p back at once (the free was filed under B's own
 * per-thread queue, which B may reuse without waiting): "B got A's block
 * while A's work on it was pending". */
Test(core_stream_regressions, free_mode_stream_cudaFree_waits_for_the_allocating_thread) {
  /* memory short at the third block: reuse, not growth (alloc/settle.c) */
  core_start("sim_events:manual,free_mode:stream,sim_capacity_mb:8");
  per_thread_t a = {0};
  pthread_t t;
  pthread_create(&t, NULL, allocate_and_leave_work, &a);
  pthread_join(t, NULL);
  /* This thread is B. */
  cr_assert_eq(cudalloc_free_sync(a.p), cudaSuccess);
  void *q = alloc_on(3 * MiB, CA_STREAM_PER_THREAD);
  cr_assert(pending(a.work));
  cr_assert_neq(q, a.p, "B got A's block while A's work on it was pending");
  ca_sim_complete_all();
  cudalloc_step();
  ca_sim_complete_all();
  cr_assert_eq(alloc_on(3 * MiB, CA_STREAM_PER_THREAD), a.p, "once A's work is done the block is reused");
  ca_backend_sim.event_destroy(a.work);
  CHECK_CONSISTENT();
}

// ----------------------------------------------------------------------------
// The C API: cudalloc_free_sync and streams the preload never saw created
// ----------------------------------------------------------------------------

/* A program linked with libcudalloc.a creates its non-blocking stream with
 * the real runtime (here: the simulated device, without telling the core).
 * Before the fix the C API had no way to name it, and cudalloc_free_sync
 * handed p out while the stream's work was pending (run with
 * cudalloc_stream_register as a no-op, the most the old API allowed: "p
 * handed out while the non-blocking stream still used it"). */
Test(core_stream_regressions, free_sync_waits_for_a_stream_registered_through_the_c_api) {
  core_start("sim_events:manual");
  ca_stream_t nb;
  cr_assert_eq(ca_sim_stream_create(&nb, 1), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_stream_register((cudaStream_t)nb, cudaStreamNonBlocking), cudaSuccess);
  void *p = alloc_on(5 * MiB, NULL);
  ca_event_t work = work_on(0, nb);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();                /* the fence is recorded */
  ca_sim_stream_complete(NULL);   /* the legacy stream is done, nb is not */
  cr_assert_neq(alloc_on(5 * MiB, NULL), p, "p handed out while the non-blocking stream still used it");
  cr_assert(pending(work));
  ca_sim_stream_complete(nb);
  cr_assert_eq(alloc_on(5 * MiB, NULL), p);
  cr_assert_eq(cudalloc_stream_unregister((cudaStream_t)nb), cudaSuccess);
  ca_backend_sim.event_destroy(work);
  CHECK_CONSISTENT();
}

/* Registering a handle that names no stream is refused (input tried: a
 * made-up pointer, and a destroyed stream). */
Test(core_stream_regressions, registering_a_bad_handle_is_refused) {
  core_start("sim_events:manual");
  cr_assert_eq(cudalloc_stream_register((cudaStream_t)0xdead0000, cudaStreamNonBlocking),
               cudaErrorInvalidResourceHandle);
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, 1), CUDA_SUCCESS);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_stream_register((cudaStream_t)s, cudaStreamNonBlocking), cudaErrorInvalidResourceHandle);
  cr_assert_eq(cudalloc_stream_register(NULL, 0), cudaSuccess, "the default streams need no registration");
}

// ----------------------------------------------------------------------------
// A transient failure while a stream is registered
// ----------------------------------------------------------------------------

/* What cudaStreamCreateWithFlags(cudaStreamNonBlocking) does under the
 * preload, with op failing once while the core learns of the stream (or
 * failing until the fence has been recorded); then cudaFree's promise on a
 * block the stream uses. Returns true when the block was never handed out
 * while the stream's work was pending. */
static bool registration_survives(ca_backend_op_t op, bool until_sealed) {
  core_start("sim_events:manual");
  ca_stream_t nb;
  cr_assert_eq(ca_sim_stream_create(&nb, 1), CUDA_SUCCESS);
  void *p = alloc_on(5 * MiB, NULL);
  if (until_sealed) ca_sim_fail_rate(op, 1.0, 1);
  else ca_sim_fail_nth(op, 1);
  ca_stream_created(nb, true);
  ca_event_t work = work_on(0, nb);
  cudalloc_free_sync(p);
  cudalloc_step();
  ca_sim_fail_rate(op, 0, 0);
  ca_sim_stream_complete(NULL);
  void *q = alloc_on(5 * MiB, NULL);
  bool safe = q != p || !pending(work);
  ca_sim_complete_all();
  cudalloc_step();
  ca_sim_complete_all();
  if (safe && q != p) cr_assert_eq(alloc_on(5 * MiB, NULL), p, "released once all work is done");
  ca_backend_sim.event_destroy(work);
  CHECK_CONSISTENT();
  return safe;
}

/* Before the fix: the stream was left unregistered, cudaFree's fence
 * ignored it and p was handed out while nb still used it ("registration
 * lost"). */
Test(core_stream_regressions, one_failed_device_lookup_loses_no_registration) {
  cr_assert(registration_survives(CA_OP_get_device, false), "registration lost: p reused while nb used it");
}

/* The lookup the fix uses instead, failing once: retried at the seal. */
Test(core_stream_regressions, one_failed_stream_lookup_loses_no_registration) {
  cr_assert(registration_survives(CA_OP_stream_device, false), "registration lost: p reused while nb used it");
}

/* A lookup that keeps failing until the fence is recorded: the fence then
 * waits for the whole device (no regression test: the old code had no
 * such lookup; it shows the conservative path). */
Test(core_stream_regressions, a_stream_that_cannot_be_placed_is_fenced_conservatively) {
  cr_assert(registration_survives(CA_OP_stream_device, true), "p reused while an unplaced stream used it");
  cr_assert_gt(stats0().backend_sync.total, 0, "by synchronizing the device");
}

// ----------------------------------------------------------------------------
// cudaMalloc after cudaFreeAsync(p, 0)
// ----------------------------------------------------------------------------

/* Before the fix: the cudaMalloc got p at once from the legacy stream's
 * queue, although a non-blocking stream may use cudaMalloc's memory without
 * waiting for the legacy stream ("cudaMalloc got a block with work
 * pending"). */
Test(core_stream_regressions, cudaMalloc_takes_only_completed_blocks) {
  /* legacy_queue:off: the program may have a non-blocking stream (with the
   * legacy queue, none exists yet: test_core_legacy_queue.c) */
  core_start("sim_events:manual,legacy_queue:off");
  void *p = alloc_sync(3 * MiB);
  ca_event_t work = work_on(0, CA_STREAM_LEGACY);
  cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);   /* cudaFreeAsync(p, 0) */
  cr_assert_neq(alloc_sync(3 * MiB), p, "cudaMalloc got a block with work pending");
  cr_assert(pending(work));
  cr_assert_eq(alloc_on(3 * MiB, NULL), p, "the legacy stream itself still reuses it at once");
  ca_backend_sim.event_destroy(work);
  CHECK_CONSISTENT();
}

Test(core_stream_regressions, cudaMalloc_reuses_once_the_work_is_done) {
  core_start("sim_events:manual");
  void *p = alloc_sync(3 * MiB);
  cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);
  seal_and_poll();   /* a slow path's seal (a step seals only cudaFree's queue) */
  ca_sim_complete_all();
  seal_and_poll();
  cr_assert_eq(alloc_sync(3 * MiB), p);
  CHECK_CONSISTENT();
}

// ----------------------------------------------------------------------------
// Bad stream handles at the allocation and free entry points
// ----------------------------------------------------------------------------

#define GARBAGE ((ca_stream_t)0xdead0000)

static ca_stream_t destroyed_stream(void) {
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, 1), CUDA_SUCCESS);
  ca_stream_created(s, true);
  ca_stream_destroyed(s);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);
  return s;
}

/* Before the fix both allocations succeeded (cudaSuccess) and their later
 * frees never completed. Input tried: a made-up handle, a destroyed one. */
Test(core_stream_regressions, allocations_on_bad_handles_are_refused) {
  core_start("sim_events:manual");
  ca_stream_t gone = destroyed_stream();
  ca_stream_t bad[] = {GARBAGE, gone};
  for (int i = 0; i < 2; i++) {
    void *p = (void *)0x1234;
    cr_assert_eq(cudalloc_malloc(&p, MiB, (cudaStream_t)bad[i]), cudaErrorInvalidResourceHandle,
                 "allocation on bad handle %d", i);
    cr_assert_eq(p, (void *)0x1234, "the result was written");
  }
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.num_allocs.total, 0);
  cr_assert_eq(s.reserved_bytes.current, 0, "a refused call changed nothing");
}

/* Before the fix the frees succeeded and the block stayed pending forever
 * (the fence on that handle could never be recorded): 300 MiB lost in the
 * issue's run. Input tried: a made-up handle, a destroyed one. */
Test(core_stream_regressions, frees_on_bad_handles_are_refused_and_keep_the_block) {
  core_start("sim_events:manual");
  ca_stream_t gone = destroyed_stream();
  void *p = alloc_on(3 * MiB, NULL);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)GARBAGE), cudaErrorInvalidResourceHandle);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)gone), cudaErrorInvalidResourceHandle);
  cr_assert_eq(stats0().num_live_blocks.current, 1, "the block is still the program's");
  cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess, "and a good free of it works");
  seal_and_poll();
  ca_sim_complete_all();
  seal_and_poll();
  cr_assert_eq(stats0().active_bytes.current, 0, "nothing is left pending");
  CHECK_CONSISTENT();
}

/* A free on a good stream while the backend cannot answer for it (its
 * lookup fails once): the free succeeds, and the block waits as cudaFree's
 * would, not on the stream alone (no regression test: the lookup is the
 * fix's). */
Test(core_stream_regressions, a_free_whose_stream_cannot_be_checked_waits_like_cudaFree) {
  core_start("sim_events:manual");
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, 1), CUDA_SUCCESS);
  ca_stream_created(s, true);
  void *p = alloc_on(3 * MiB, s);
  ca_streamdev_forget();   /* the thread asks the backend again, as after a stream made elsewhere */
  ca_sim_fail_nth(CA_OP_stream_device, 1);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)s), cudaSuccess);
  cr_assert_eq(ca_sim_errors(CA_OP_stream_device), 1, "the lookup was made and failed");
  cr_assert_neq(alloc_on(3 * MiB, s), p, "not reused on the stream at once: it waits in the epoch");
  ca_sim_complete_all();
  cudalloc_step();
  ca_sim_complete_all();
  cr_assert_eq(alloc_on(3 * MiB, NULL), p, "and is released once the device's work is done");
  CHECK_CONSISTENT();
}

/* free_mode:stream, cudaFree after the allocation stream was destroyed.
 * Before the fix the block waited for an event on the dead handle that
 * could never be recorded: active_bytes stayed at 3 MiB. */
Test(core_stream_regressions, free_mode_stream_free_after_the_stream_is_gone_uses_the_epoch) {
  core_start("sim_events:manual,free_mode:stream");
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, 0), CUDA_SUCCESS);
  ca_stream_created(s, false);
  void *p = alloc_on(3 * MiB, s);
  ca_stream_destroyed(s);
  cr_assert_eq(ca_sim_stream_destroy(s), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();
  ca_sim_complete_all();
  cudalloc_step();
  cr_assert_eq(stats0().active_bytes.current, 0, "the block is released through the device's epoch");
  CHECK_CONSISTENT();
}

/* A kernel on a non-blocking stream uses p; the program destroys the
 * stream (its work runs on) and cudaFree's p. Before the fix the fence
 * recorded only on the streams still alive, and p came back once the
 * legacy stream was done: "p handed out while the destroyed stream's work
 * still used it". */
Test(core_stream_regressions, cudaFree_after_a_stream_is_destroyed_waits_for_its_last_work) {
  core_start("sim_events:manual");
  ca_stream_t nb;
  cr_assert_eq(ca_sim_stream_create(&nb, 1), CUDA_SUCCESS);
  ca_stream_created(nb, true);
  void *p = alloc_sync(3 * MiB);
  ca_event_t work = work_on(0, nb);
  ca_stream_destroyed(nb);
  cr_assert_eq(ca_sim_stream_destroy(nb), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cudalloc_step();                /* the fence is recorded */
  ca_sim_stream_complete(NULL);   /* the legacy stream is done, the destroyed one's work is not */
  cr_assert_neq(alloc_sync(3 * MiB), p, "p handed out while the destroyed stream's work still used it");
  cr_assert(pending(work));
  ca_sim_complete_all();
  cudalloc_step();
  cr_assert_eq(alloc_sync(3 * MiB), p, "p comes back once the work is done");
  ca_backend_sim.event_destroy(work);
  CHECK_CONSISTENT();
}

/* cudaMallocAsync allocates on the stream's device. Before the fix the
 * block came from device 0 (the current one): "allocated on device 0". */
Test(core_stream_regressions, stream_ordered_allocation_uses_the_streams_device) {
  core_start("sim_events:manual,sim_devices:2");
  ca_stream_t s1 = stream_of_device_1();
  void *p = alloc_on(3 * MiB, s1);
  cr_assert_eq(stats_of(0).num_live_blocks.current, 0, "allocated on device 0");
  cr_assert_eq(stats_of(1).num_live_blocks.current, 1);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)s1), cudaSuccess);
  CHECK_CONSISTENT();
}

/* A block of device 0 freed on a stream of device 1, and an explicit
 * device with another device's stream (cudalloc_torch_malloc's call). Input
 * tried: both mismatches. */
Test(core_stream_regressions, another_devices_stream_is_refused) {
  core_start("sim_events:manual,sim_devices:2");
  ca_stream_t s1 = stream_of_device_1();
  void *p = alloc_on(3 * MiB, NULL), *q = NULL;
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)s1), cudaErrorInvalidResourceHandle);
  cr_assert_eq(ca_malloc_on(0, &q, MiB, s1, CA_ALLOC_ASYNC, NULL), CUDA_ERROR_INVALID_HANDLE);
  cr_assert_null(q);
  cr_assert_eq(stats_of(0).num_live_blocks.current, 1);
  cr_assert_eq(cudalloc_free(p, NULL), cudaSuccess);
  CHECK_CONSISTENT();
}

// ----------------------------------------------------------------------------
// Several devices: sealing another device's queues
// ----------------------------------------------------------------------------

/* 256 MiB freed on device 1, then device 0 made current; how the program
 * then settles: empty_cache, step, or destroying a stream of device 1. */
typedef enum { BY_EMPTY_CACHE, BY_STEP, BY_STREAM_DESTROY } settle_t;

static int64_t pending_after(settle_t how) {
  core_start("sim_events:manual,sim_devices:2,sim_capacity_mb:512");
  ca_stream_t s1 = stream_of_device_1();
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  void *p = alloc_on(256 * MiB, how == BY_STREAM_DESTROY ? s1 : NULL);
  cr_assert_eq(ca_backend_sim.set_device(0), CUDA_SUCCESS);
  uint64_t violations = ca_sim_violations();
  if (how == BY_STREAM_DESTROY) {
    cr_assert_eq(cudalloc_free(p, (cudaStream_t)s1), cudaSuccess);
    ca_stream_destroyed(s1);
    cr_assert_eq(ca_sim_stream_destroy(s1), CUDA_SUCCESS);
  } else {
    cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
    if (how == BY_EMPTY_CACHE) cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
    else cudalloc_step();
  }
  ca_sim_complete_all();
  cudalloc_step();
  cr_assert_eq(ca_sim_violations(), violations, "the core broke a rule of the device");
  CHECK_CONSISTENT();
  return stats_of(1).active_bytes.current;
}

/* Before the fix: the fence's event (device 1's) was recorded on the
 * current device's legacy stream, which the device refused ("the core broke
 * a rule of the device"), and the 256 MiB stayed pending for ever. */
Test(core_stream_regressions, empty_cache_seals_another_devices_queues) {
  int64_t left = pending_after(BY_EMPTY_CACHE);
  cr_assert_eq(left, 0, "%lld bytes still pending", (long long)left);
}

Test(core_stream_regressions, step_seals_another_devices_queues) {
  int64_t left = pending_after(BY_STEP);
  cr_assert_eq(left, 0, "%lld bytes still pending", (long long)left);
}

/* A guard, not a regression: this path passed before the fix too (the
 * destroyed stream is named by its own handle, not a default one). */
Test(core_stream_regressions, destroying_another_devices_stream_seals_its_queue) {
  int64_t left = pending_after(BY_STREAM_DESTROY);
  cr_assert_eq(left, 0, "%lld bytes still pending", (long long)left);
}
