/* The legacy queue (legacy_queue:auto, alloc/legacyq.c): while a program
 * has used no stream but the legacy one, from one thread, a cudaFree'd
 * block is reused by the next cudaMalloc with no event recorded, queried
 * or waited for. Anything that breaks that one FIFO (a stream created, a
 * handle cudalloc never saw, a per-thread stream, a second thread, peer
 * access) ends the mode and synchronizes the device once, and cudaFree'd
 * blocks wait for their fence again. The reuse oracle agrees: it stays
 * silent here, and catches the mode kept past a new stream (a test-only
 * switch). */
#include "core_testing.h"

#include <pthread.h>

/* Kernels are the simulated device's touches, completed by the tests. */
static void sim_only(void) { SKIP_ON_CUDA("the simulated device's kernels are touches"); }
/* These tests stand for a preloaded program, whose shim hears of every
 * stream it creates and says so at load. */
static void preloaded(void) {
  sim_only();
  ca_streams_all_seen();
}
TestSuite(core_legacy_queue, .init = preloaded, .fini = core_fini);
/* Linked as a library (libcudalloc.a, or dlopen'ed with local scope): no
 * shim hears of the program's streams. */
TestSuite(core_legacy_queue_library, .init = sim_only, .fini = core_fini);

static int64_t event_calls(const cudalloc_stats_t *s) {
  return s->backend_event_record.total + s->backend_event_query.total;
}

static void *alloc_sync(size_t size) {
  void *p = NULL;
  cr_assert_eq(ca_malloc(&p, size, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);   /* as cudaMalloc */
  return p;
}

/* alloc_sync where the oracle may print a violation: what it printed goes
 * to out, kept out of make test's output. */
static void *alloc_sync_captured(size_t size, char *out, size_t n) {
  capture_t cap;
  capture_begin(&cap);
  void *q = alloc_sync(size);
  capture_end(&cap, out, n);
  return q;
}

/* A block a kernel on stream still writes, cudaFree'd. */
static void *freed_in_flight(size_t size, ca_stream_t stream) {
  void *p = alloc_sync(size);
  TOUCH(stream, p, size, true);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  return p;
}

static ca_stream_t created_stream(bool nonblocking) {
  ca_stream_t s;
  cr_assert_eq(ca_sim_stream_create(&s, nonblocking), CUDA_SUCCESS);
  cr_assert_eq(ca_stream_created(s, nonblocking), CUDA_SUCCESS);
  return s;
}

/* A training step as a plain C loop makes it: activations of changing
 * sizes, each cudaMalloc'd, written by a kernel on the legacy stream and
 * cudaFree'd after its last use, some freed before the next is allocated
 * (so that the next needs their memory); no synchronization at all, so
 * that nothing but the legacy queue can make the frees reusable. */
static void one_step(int step) {
  void *keep = alloc_sync((size_t)(4 + step % 3) * MiB);
  TOUCH(CA_STREAM_LEGACY, keep, MiB, true);
  for (int i = 0; i < 6; i++) {
    void *a = alloc_sync((size_t)(i + 1) * 3 * MiB + (size_t)step * 4096);
    TOUCH(CA_STREAM_LEGACY, a, MiB, true);
    cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
  }
  cr_assert_eq(cudalloc_free_sync(keep), cudaSuccess);
  cudalloc_step();
}

/* Calls per step over steps 10..39 of the loop, with conf. */
static void loop_calls(const char *conf, double *events, double *memory, double *syncs) {
  core_start(conf);
  cudalloc_stats_t s0 = stats0();
  for (int step = 0; step < 40; step++) {
    if (step == 10) s0 = stats0();
    one_step(step);
  }
  cudalloc_stats_t s1 = stats0();
  *events = (double)(event_calls(&s1) - event_calls(&s0)) / 30;
  *memory = (double)(memory_calls(&s1) - memory_calls(&s0)) / 30;
  *syncs = (double)(s1.backend_sync.total - s0.backend_sync.total) / 30;
  cr_assert_eq(ca_sim_oracle_violations(), 0, "the reuse oracle saw no early reuse");
  CHECK_CONSISTENT();
}

Test(core_legacy_queue, a_single_stream_cudaFree_loop_makes_no_call_after_warm_up) {
  double events, memory, syncs;
  loop_calls("sim_events:lag", &events, &memory, &syncs);   /* the default: legacy_queue:auto */
  cr_assert_eq(events, 0, "event calls per step after warm-up: %.2f", events);
  cr_assert_eq(memory, 0, "memory calls per step after warm-up: %.2f", memory);
  cr_assert_eq(syncs, 0, "waits per step after warm-up: %.2f", syncs);
}

/* The oracle's violations so far, forgotten, with the planted fault off
 * again (the suite's .fini checks what comes after). */
static uint64_t violations_taken(void) {
  uint64_t v = ca_sim_oracle_violations();
  ca_sim_oracle_reset();
  ca_debug.legacyq_outlive_streams = false;
  return v;
}

static double events_per_step(const char *conf) {
  double events, memory, syncs;
  loop_calls(conf, &events, &memory, &syncs);
  return events;
}

/* The same loop with cudaFree's fence: the counters do count (this is
 * how the loop ran before the legacy queue). */
Test(core_legacy_queue, with_the_mode_off_the_same_loop_makes_event_calls) {
  double events = events_per_step("sim_events:lag,legacy_queue:off");
  cr_assert_gt(events, 0.5, "event calls per step after warm-up: %.2f", events);
}

/* auto needs the shim's word: a program linked with the library may run
 * work on streams it made with the runtime, which cudalloc never hears
 * of, so cudaFree keeps its fence; legacy_queue:on is the program's own
 * word that it registers every stream. Before the rule, auto held here
 * too: "event calls per step after warm-up: 0.00". */
Test(core_legacy_queue_library, auto_keeps_cudaFrees_fence_without_the_shims_word) {
  double events = events_per_step("sim_events:lag");
  cr_assert_gt(events, 0.5, "event calls per step after warm-up: %.2f", events);
}

Test(core_legacy_queue_library, on_is_the_programs_word) {
  double events = events_per_step("sim_events:lag,legacy_queue:on");
  cr_assert_eq(events, 0, "event calls per step after warm-up: %.2f", events);
}

/* cudaMalloc takes the block at once, ordered behind the kernel on the
 * legacy stream that still writes it; the oracle, asked for the legacy
 * stream, agrees. */
Test(core_legacy_queue, cudaMalloc_reuses_a_cudaFreed_block_with_work_pending) {
  core_start("sim_events:manual");
  void *p = freed_in_flight(3 * MiB, CA_STREAM_LEGACY);
  cudalloc_stats_t s0 = stats0();
  cr_assert_eq(alloc_sync(3 * MiB), p, "no wait, no event");
  cudalloc_stats_t s1 = stats0();
  cr_assert_eq(event_calls(&s1) + s1.backend_sync.total, event_calls(&s0) + s0.backend_sync.total);
  cr_assert_eq(ca_sim_pending_touches(), 1, "the kernel still runs");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  CHECK_CONSISTENT();
}

/* After the mode ends: a cudaFree'd block with work pending waits. */
static void assert_cudaFree_waits_again(ca_stream_t stream) {
  void *p = freed_in_flight(5 * MiB, stream);
  void *q = alloc_sync(5 * MiB);
  cr_assert_neq(q, p, "a cudaFree'd block with work pending is not handed out again");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  CHECK_CONSISTENT();
}

/* The stream's creation ends the mode: the block cudaMalloc took behind
 * pending legacy work is safe on the new stream, since the device was
 * synchronized once. */
Test(core_legacy_queue, a_new_nonblocking_stream_ends_the_mode_with_one_synchronization) {
  core_start("sim_events:manual");
  void *p = freed_in_flight(3 * MiB, CA_STREAM_LEGACY);
  cr_assert_eq(alloc_sync(3 * MiB), p);
  int64_t syncs = stats0().backend_sync.total;
  ca_stream_t n = created_stream(true);
  cr_assert_eq(stats0().backend_sync.total, syncs + 1, "one synchronization of the device");
  cr_assert_eq(ca_sim_pending_touches(), 0, "the work on the reused block is complete before n can use it");
  assert_cudaFree_waits_again(n);
  created_stream(false);
  cr_assert_eq(stats0().backend_sync.total, syncs + 1, "only once");
}

/* A blocking stream waits for the legacy stream and the legacy stream for
 * it, but two blocking streams do not wait for each other: any stream
 * created ends the mode. */
Test(core_legacy_queue, a_new_blocking_stream_ends_the_mode) {
  core_start("sim_events:manual");
  ca_stream_t b = created_stream(false);
  assert_cudaFree_waits_again(b);
}

/* A stream made before the preload, or by a path the shim does not
 * intercept: its handle reaching an allocation ends the mode. */
Test(core_legacy_queue, an_unseen_stream_handle_ends_the_mode) {
  core_start("sim_events:manual");
  ca_stream_t unseen;
  cr_assert_eq(ca_sim_stream_create(&unseen, 1), CUDA_SUCCESS);   /* not told to cudalloc */
  void *p = freed_in_flight(3 * MiB, CA_STREAM_LEGACY);
  cr_assert_eq(alloc_sync(3 * MiB), p, "the mode holds: cudalloc saw no other stream yet");
  int64_t syncs = stats0().backend_sync.total;
  void *x = NULL;
  cr_assert_eq(cudalloc_malloc(&x, MiB, (cudaStream_t)unseen), cudaSuccess);
  cr_assert_eq(stats0().backend_sync.total, syncs + 1, "the device is synchronized when the handle shows up");
  cr_assert_eq(ca_sim_pending_touches(), 0);
  assert_cudaFree_waits_again(unseen);
}

/* The same handle in a free (cudaFreeAsync on a stream never seen). */
Test(core_legacy_queue, an_unseen_stream_in_a_free_ends_the_mode) {
  core_start("sim_events:manual");
  ca_stream_t unseen;
  cr_assert_eq(ca_sim_stream_create(&unseen, 1), CUDA_SUCCESS);
  void *x = alloc_sync(MiB);
  cr_assert_eq(cudalloc_free(x, (cudaStream_t)unseen), cudaSuccess);
  assert_cudaFree_waits_again(unseen);
}

/* cudaStreamPerThread is a stream of its own (--default-stream
 * per-thread), not the legacy one. */
Test(core_legacy_queue, a_per_thread_stream_ends_the_mode) {
  core_start("sim_events:manual");
  void *x = NULL;
  cr_assert_eq(cudalloc_malloc(&x, MiB, (cudaStream_t)CA_STREAM_PER_THREAD), cudaSuccess);
  assert_cudaFree_waits_again(CA_STREAM_PER_THREAD);
}

static void *alloc_and_free_elsewhere(void *arg) {
  (void)arg;
  ca_sim_thread_init();
  void *p = alloc_sync(MiB);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  return NULL;
}

/* Compiled with --default-stream per-thread, each thread's stream 0 is a
 * stream of its own, and cudaMalloc and cudaFree do not say so: a second
 * thread ends the mode. */
Test(core_legacy_queue, a_second_thread_ends_the_mode) {
  core_start("sim_events:manual");
  void *p = alloc_sync(MiB);   /* this thread is the first */
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, alloc_and_free_elsewhere, NULL), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  assert_cudaFree_waits_again(CA_STREAM_PER_THREAD);
}

/* Another device's kernels may touch this device's memory. */
Test(core_legacy_queue, peer_access_ends_the_mode) {
  core_start("sim_devices:2,sim_events:manual");
  void *p = alloc_sync(MiB);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(ca_peer_access_enabled(1, 0), CUDA_SUCCESS);
  assert_cudaFree_waits_again(CA_STREAM_LEGACY);
}

/* legacy_queue:off: cudaFree's fence from the first free. */
Test(core_legacy_queue, off_keeps_cudaFree_s_fence) {
  core_start("sim_events:manual,legacy_queue:off");
  assert_cudaFree_waits_again(CA_STREAM_LEGACY);
}

/* A kernel on a non-blocking stream still writes the block when it is
 * cudaFree'd and cudaMalloc'd again. With the mode ended at the stream's
 * creation, the block waits; with the mode kept (the planted fault), it is
 * handed out for the legacy stream, which does not wait for that stream:
 * the oracle must say so. */
static uint64_t violations_with_a_nonblocking_kernel(bool keep_mode) {
  core_start("sim_events:manual");
  ca_debug.legacyq_outlive_streams = keep_mode;
  ca_stream_t n = created_stream(true);
  void *p = freed_in_flight(3 * MiB, n);
  char out[2048];
  void *q = alloc_sync_captured(3 * MiB, out, sizeof out);
  cr_assert_eq(q == p, keep_mode, "the block came back with the kernel running: %d", q == p);
  if (keep_mode) cr_assert_not_null(strstr(out, "reuse oracle"), "the violation is printed: %s", out);
  return violations_taken();
}

Test(core_legacy_queue, the_oracle_stays_silent_when_a_stream_ends_the_mode) {
  cr_assert_eq(violations_with_a_nonblocking_kernel(false), 0);
}

Test(core_legacy_queue, the_oracle_catches_the_mode_kept_past_a_new_stream) {
  cr_assert_eq(violations_with_a_nonblocking_kernel(true), 1);
}

// ----------------------------------------------------------------------------
// A synchronization of the legacy stream (cudaStreamSynchronize(0))
// ----------------------------------------------------------------------------

static int64_t pending_bytes(void) {
  cudalloc_stats_t s = stats0();
  return s.active_bytes.current - s.allocated_bytes.current;
}

/* What the shim's cudaStreamSynchronize does. */
static void synchronize_legacy_stream(void) {
  ca_sync_token_t t = ca_stream_sync_begin(CA_STREAM_LEGACY);
  bool ok = ca_state.be->stream_sync(CA_STREAM_LEGACY) == CUDA_SUCCESS;
  ca_stream_sync_end(t, ok);
}

/* While the legacy stream is the only one, waiting for it is waiting for
 * the device: the frees come back to the pool (where they merge and can
 * be given back) with no event. */
Test(core_legacy_queue, a_legacy_stream_synchronization_settles_the_frees_with_no_event) {
  core_start("sim_events:manual");
  freed_in_flight(4 * MiB, CA_STREAM_LEGACY);
  cr_assert_eq(pending_bytes(), 4 * MiB);
  cudalloc_stats_t s0 = stats0();
  synchronize_legacy_stream();
  cudalloc_stats_t s1 = stats0();
  cr_assert_eq(pending_bytes(), 0, "the block is free");
  cr_assert_eq(event_calls(&s1) + s1.backend_sync.total, event_calls(&s0) + s0.backend_sync.total,
               "no event, no other wait");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  CHECK_CONSISTENT();
}

/* With another stream, the legacy stream's synchronization does not wait
 * for that stream's work: it proves nothing. */
Test(core_legacy_queue, with_another_stream_a_legacy_synchronization_proves_nothing) {
  core_start("sim_events:manual");
  ca_stream_t n = created_stream(true);
  freed_in_flight(4 * MiB, n);
  synchronize_legacy_stream();
  cr_assert_eq(pending_bytes(), 4 * MiB, "the kernel on n still runs");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

/* The planted fault again (the mode kept past a non-blocking stream): the
 * legacy stream's synchronization, trusted although n exists, releases a
 * block that n freed while its kernel still writes it, and the oracle
 * catches the next hand-out of it. Without the fault the block stays in
 * n's queue (the test above). */
static uint64_t violations_after_a_legacy_synchronization(bool keep_mode) {
  core_start("sim_events:manual");
  ca_debug.legacyq_outlive_streams = keep_mode;
  ca_stream_t n = created_stream(true);
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, 4 * MiB, (cudaStream_t)n), cudaSuccess);
  TOUCH(n, p, 4 * MiB, true);
  cr_assert_eq(cudalloc_free(p, (cudaStream_t)n), cudaSuccess);
  synchronize_legacy_stream();
  char out[2048];
  void *q = alloc_sync_captured(4 * MiB, out, sizeof out);
  cr_assert_eq(q == p, keep_mode, "the block came back with n's kernel running: %d", q == p);
  return violations_taken();
}

Test(core_legacy_queue, a_legacy_synchronization_releases_no_other_stream_s_block) {
  cr_assert_eq(violations_after_a_legacy_synchronization(false), 0);
}

Test(core_legacy_queue, the_oracle_catches_a_legacy_synchronization_trusted_past_a_new_stream) {
  cr_assert_eq(violations_after_a_legacy_synchronization(true), 1);
}

/* A small block freed on a stream never seen goes to the thread's front
 * cache, without the device lock: the handle must end the mode all the
 * same (before: the front cache took the free, and a cudaFree'd block was
 * then reused with no event: "a cudaFree'd block with work pending is not
 * handed out again" failed, and the reuse oracle reported the hand-out). */
Test(core_legacy_queue, an_unseen_stream_in_a_front_cache_free_ends_the_mode) {
  core_start("sim_events:manual");
  ca_stream_t unseen;
  cr_assert_eq(ca_sim_stream_create(&unseen, 1), CUDA_SUCCESS);
  void *x = NULL;
  cr_assert_eq(cudalloc_malloc(&x, 4096, 0), cudaSuccess);   /* cudaMallocAsync(x, 0): a front-cache size */
  cr_assert_eq(cudalloc_free(x, (cudaStream_t)unseen), cudaSuccess);
  assert_cudaFree_waits_again(unseen);
}
