/* Streams and events of the simulated device: in manual mode an event
 * completes only when the test says so, or when something waits for it;
 * the legacy default stream orders the blocking streams; non-blocking and
 * per-thread streams are separate; capture is refused where the driver
 * refuses it. */
#define _GNU_SOURCE
#include <pthread.h>

#include "sim_testing.h"

#define CONF "backend:sim"
#define MANUAL "backend:sim,sim_events:manual"

TestSuite(sim_streams, .fini = sim_fini);

#define DONE(be, e) cr_assert_eq((be)->event_query(e), CUDA_SUCCESS, "%s is not complete", #e)
#define PENDING(be, e) \
  cr_assert_eq((be)->event_query(e), CUDA_ERROR_NOT_READY, "%s completed", #e)

static ca_event_t new_event(const ca_backend_t *be, int dev) {
  ca_event_t e;
  OK(be->event_create(dev, &e));
  return e;
}

static ca_stream_t new_stream(int nonblocking) {
  ca_stream_t s;
  OK(ca_sim_stream_create(&s, nonblocking));
  return s;
}

// ----------------------------------------------------------------------------
// What holds on a GPU as well
// ----------------------------------------------------------------------------

Test(sim_streams, an_event_never_recorded_is_complete) {
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_event_t e = new_event(be, 0);
  DONE(be, e);
  OK(be->event_sync(e));
  OK(be->event_destroy(e));
}

Test(sim_streams, default_streams_complete_when_synchronized) {
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, NULL));
  OK(be->stream_sync(NULL));
  DONE(be, e);
  OK(be->event_record(e, CA_STREAM_PER_THREAD));
  OK(be->event_sync(e));
  DONE(be, e);
  OK(be->device_sync(0));
  int capturing = -1;
  OK(be->is_capturing(CA_STREAM_LEGACY, &capturing));
  cr_assert_eq(capturing, 0);
  OK(be->event_destroy(e));
}

// ----------------------------------------------------------------------------
// Auto and manual completion
// ----------------------------------------------------------------------------

Test(sim_streams, auto_mode_completes_at_once) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, s));
  DONE(be, e);
}

Test(sim_streams, manual_mode_waits_for_the_test) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, s));
  for (int i = 0; i < 3; i++) PENDING(be, e);
  ca_sim_stream_complete(s);
  DONE(be, e);
  /* recording again makes it pending again */
  OK(be->event_record(e, s));
  PENDING(be, e);
  ca_sim_complete_all();
  DONE(be, e);
}

Test(sim_streams, completing_covers_only_what_was_recorded) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t a = new_event(be, 0), b = new_event(be, 0);
  OK(be->event_record(a, s));
  ca_sim_stream_complete(s);
  OK(be->event_record(b, s));
  DONE(be, a);
  PENDING(be, b);
}

Test(sim_streams, waiting_completes_the_work) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(1), t = new_stream(1);
  ca_event_t a = new_event(be, 0), b = new_event(be, 0), c = new_event(be, 0);
  OK(be->event_record(a, s));
  OK(be->event_record(b, s));
  OK(be->event_record(c, t));
  OK(be->event_sync(a)); /* completes a, not the later b */
  DONE(be, a);
  PENDING(be, b);
  OK(be->stream_sync(s));
  DONE(be, b);
  PENDING(be, c);
  OK(be->device_sync(0));
  DONE(be, c);
}

Test(sim_streams, device_sync_completes_its_device_only) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:manual,sim_devices:2", NULL);
  ca_event_t e0 = new_event(be, 0), e1 = new_event(be, 1);
  OK(be->event_record(e0, NULL));
  OK(be->set_device(1));
  ca_stream_t s1 = new_stream(0);
  OK(be->event_record(e1, s1));
  OK(be->device_sync(1));
  DONE(be, e1);
  PENDING(be, e0);
  OK(be->device_sync(0));
  DONE(be, e0);
}

Test(sim_streams, back_to_auto_completes_what_is_pending) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_sim_set_manual_events(1);
  ca_stream_t s = new_stream(0);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, s));
  PENDING(be, e);
  ca_sim_set_manual_events(0);
  DONE(be, e);
  OK(be->event_record(e, s));
  DONE(be, e);
}

// ----------------------------------------------------------------------------
// The legacy default stream, blocking, non-blocking and per-thread streams
// ----------------------------------------------------------------------------

Test(sim_streams, null_and_0x1_are_one_stream) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, NULL));
  PENDING(be, e);
  ca_sim_stream_complete(CA_STREAM_LEGACY);
  DONE(be, e);
}

Test(sim_streams, legacy_work_waits_for_earlier_blocking_work) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0), nb = new_stream(1);
  ca_event_t es = new_event(be, 0), enb = new_event(be, 0), el = new_event(be, 0);
  OK(be->event_record(es, s));
  OK(be->event_record(enb, nb));
  OK(be->event_record(el, NULL));
  ca_sim_stream_complete(s); /* the blocking stream alone: not the legacy one */
  DONE(be, es);
  PENDING(be, el);
  OK(be->event_record(es, s));
  ca_sim_stream_complete(NULL); /* legacy work done implies earlier blocking work done */
  DONE(be, el);
  PENDING(be, es);            /* recorded after el: not waited for */
  PENDING(be, enb);           /* non-blocking: independent */
}

Test(sim_streams, legacy_completion_implies_earlier_blocking_completion) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t es = new_event(be, 0), el = new_event(be, 0);
  OK(be->event_record(es, s));
  OK(be->event_record(el, CA_STREAM_LEGACY));
  OK(be->event_sync(el));
  DONE(be, es);
}

Test(sim_streams, blocking_work_waits_for_earlier_legacy_work) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0), nb = new_stream(1);
  ca_event_t el = new_event(be, 0), es = new_event(be, 0), enb = new_event(be, 0);
  OK(be->event_record(el, NULL));
  OK(be->event_record(es, s));
  OK(be->event_record(enb, nb));
  ca_sim_stream_complete(nb);
  DONE(be, enb);
  PENDING(be, el); /* a non-blocking stream does not wait for the legacy one */
  ca_sim_stream_complete(s);
  DONE(be, es);
  DONE(be, el);    /* s waited for el */
}

Test(sim_streams, per_thread_stream_is_separate_but_blocking) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_event_t ep = new_event(be, 0), el = new_event(be, 0);
  OK(be->event_record(ep, CA_STREAM_PER_THREAD));
  ca_sim_stream_complete(NULL);
  PENDING(be, ep); /* not the legacy stream */
  OK(be->event_record(el, NULL));
  ca_sim_stream_complete(NULL);
  DONE(be, el);
  DONE(be, ep); /* the legacy stream waited for it */
  cr_assert_eq(ca_sim_stream_is_nonblocking(CA_STREAM_PER_THREAD), 0);
}

typedef struct {
  const ca_backend_t *be;
  ca_event_t e;
} record_arg_t;

static void *complete_own_per_thread_stream(void *arg) {
  record_arg_t *a = arg;
  int dev;
  if (a->be->get_device(&dev) != CUDA_SUCCESS) return (void *)(uintptr_t)CUDA_ERROR_INVALID_CONTEXT;
  ca_sim_stream_complete(CA_STREAM_PER_THREAD);
  return (void *)(uintptr_t)a->be->event_query(a->e);
}

Test(sim_streams, each_thread_has_its_own_per_thread_stream) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  record_arg_t a = {be, new_event(be, 0)};
  OK(be->event_record(a.e, CA_STREAM_PER_THREAD));
  pthread_t t;
  void *res;
  cr_assert_eq(pthread_create(&t, NULL, complete_own_per_thread_stream, &a), 0);
  pthread_join(t, &res);
  cr_assert_eq((CUresult)(uintptr_t)res, CUDA_ERROR_NOT_READY,
               "another thread's 0x2 completed this thread's work");
  ca_sim_stream_complete(CA_STREAM_PER_THREAD);
  DONE(be, a.e);
}

Test(sim_streams, nonblocking_is_reported) {
  SKIP_ON_CUDA("creates simulated streams");
  sim_start(CONF, NULL);
  ca_stream_t s = new_stream(0), nb = new_stream(1);
  cr_assert_eq(ca_sim_stream_is_nonblocking(s), 0);
  cr_assert_eq(ca_sim_stream_is_nonblocking(nb), 1);
  cr_assert_eq(ca_sim_stream_is_nonblocking(NULL), 0);
  cr_assert_eq(ca_sim_stream_is_nonblocking((ca_stream_t)0x1234), 0);
}

Test(sim_streams, long_chains_of_waits_complete) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t first = new_event(be, 0), e = new_event(be, 0);
  OK(be->event_record(first, s));
  for (int i = 0; i < 20000; i++) OK(be->event_record(e, i % 2 ? s : NULL));
  PENDING(be, first);
  OK(be->event_sync(e)); /* walks the whole alternating chain back */
  DONE(be, first);
}

// ----------------------------------------------------------------------------
// Handles and devices
// ----------------------------------------------------------------------------

Test(sim_streams, event_and_stream_of_different_devices) {
  SKIP_ON_CUDA("needs two devices");
  const ca_backend_t *be = sim_start("backend:sim,sim_devices:2", NULL);
  ca_event_t e1 = new_event(be, 1);
  ca_stream_t s0 = new_stream(0);
  BREAKS_RULE(be->event_record(e1, s0), CUDA_ERROR_INVALID_HANDLE);
  /* The default handles name the event's device's streams (backend.h: the
   * event is recorded in its own context), whichever device is current. */
  OK(be->event_record(e1, NULL));
  OK(be->event_record(e1, CA_STREAM_PER_THREAD));
  OK(be->set_device(1));
  OK(be->event_record(e1, NULL));
}

Test(sim_streams, dead_handles_are_refused) {
  SKIP_ON_CUDA("uses destroyed handles");
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_event_t e = new_event(be, 0);
  ca_stream_t s = new_stream(0);
  OK(be->event_destroy(e));
  BREAKS_RULE(be->event_query(e), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(be->event_destroy(e), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(be->event_query((ca_event_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
  OK(ca_sim_stream_destroy(s));
  BREAKS_RULE(be->stream_sync(s), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(ca_sim_stream_destroy(s), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(ca_sim_stream_destroy(NULL), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(ca_sim_stream_destroy(CA_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE);
  int c;
  BREAKS_RULE(be->is_capturing((ca_stream_t)0x1234, &c), CUDA_ERROR_INVALID_HANDLE);
}

Test(sim_streams, destroyed_stream_work_stays_pending) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(0);
  ca_event_t es = new_event(be, 0), el = new_event(be, 0);
  OK(be->event_record(es, s));
  OK(ca_sim_stream_destroy(s));
  PENDING(be, es);
  OK(be->event_record(el, NULL)); /* still ordered after the destroyed stream's work */
  ca_sim_stream_complete(NULL);
  DONE(be, el);
  DONE(be, es);
}

/* Handles used to be addresses, so a destroyed stream's handle would name
 * whatever stream the host allocator later put at that address; now they
 * are table ids that are never reused. (Not a regression test: glibc's
 * calloc happened not to reuse the freed address, so the old code passed
 * this too.) */
Test(sim_streams, a_destroyed_stream_handle_never_names_another_stream) {
  SKIP_ON_CUDA("uses destroyed handles");
  const ca_backend_t *be = sim_start(CONF, NULL);
  ca_stream_t dead = new_stream(0), later[16];
  OK(ca_sim_stream_destroy(dead));
  for (int i = 0; i < 16; i++) {
    later[i] = new_stream(i % 2);
    cr_assert_neq(later[i], dead, "stream %d reuses the destroyed handle", i);
  }
  BREAKS_RULE(be->stream_sync(dead), CUDA_ERROR_INVALID_HANDLE);
  ca_event_t e = new_event(be, 0);
  BREAKS_RULE(be->event_record(e, dead), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(ca_sim_touch(dead, NULL, 0, 1), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(be->stream_sync((ca_stream_t)(uintptr_t)0xdeadbeef), CUDA_ERROR_INVALID_HANDLE);
}

typedef struct {
  const ca_backend_t *be;
  ca_event_t e;
  ca_stream_t created;
  CUresult record_legacy, record_ptds, sync_legacy, capturing, create, record_created, after_init;
} no_context_t;

/* A thread that never made a context current: what a synchronization of
 * its default streams and friends answer there. Inputs tried: NULL, 0x2, a
 * stream creation. event_record is the contract's exception (backend.h):
 * its default handles name the event's device's streams, and the backend
 * makes that device's context current for it (the CUDA backend pushes the
 * primary context), so a fence can be recorded from any thread. */
static void *calls_without_a_context(void *arg) {
  no_context_t *a = arg;
  int c, dev;
  ca_stream_t s;
  a->record_legacy = a->be->event_record(a->e, NULL);
  a->record_ptds = a->be->event_record(a->e, CA_STREAM_PER_THREAD);
  a->sync_legacy = a->be->stream_sync(CA_STREAM_LEGACY);
  a->capturing = a->be->is_capturing(NULL, &c);
  a->create = ca_sim_stream_create(&s, 0);
  a->record_created = a->be->event_record(a->e, a->created); /* the stream carries its context */
  a->after_init = a->be->get_device(&dev) ? CUDA_ERROR_UNKNOWN : a->be->event_record(a->e, NULL);
  return NULL;
}

/* Before: a thread without a context used device 0's default streams (the
 * five calls above succeeded). */
Test(sim_streams, default_streams_need_a_current_context) {
  SKIP_ON_CUDA("simulated contexts");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  no_context_t a = {.be = be, .e = new_event(be, 0), .created = new_stream(1)};
  pthread_t t;
  uint64_t v0 = ca_sim_violations();
  cr_assert_eq(pthread_create(&t, NULL, calls_without_a_context, &a), 0);
  pthread_join(t, NULL);
  cr_assert_eq(a.record_legacy, CUDA_SUCCESS, "event_record's default handles are the event's device's");
  cr_assert_eq(a.record_ptds, CUDA_SUCCESS);
  cr_assert_eq(a.sync_legacy, CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(a.capturing, CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(a.create, CUDA_ERROR_INVALID_CONTEXT);
  cr_assert_eq(a.record_created, CUDA_SUCCESS);
  cr_assert_eq(a.after_init, CUDA_SUCCESS, "get_device did not give the thread a context");
  cr_assert_eq(ca_sim_violations(), v0 + 3);
}

Test(sim_streams, a_teardown_leaves_threads_without_a_context) {
  SKIP_ON_CUDA("simulated contexts");
  const ca_backend_t *be = sim_start(CONF, NULL);
  OK(be->stream_sync(NULL));
  ca_sim_shutdown();
  OK(be->init(&ca_config.sim));
  BREAKS_RULE(be->stream_sync(NULL), CUDA_ERROR_INVALID_CONTEXT);
  ca_sim_thread_init();
  OK(be->stream_sync(NULL));
}

Test(sim_streams, a_stream_waits_for_an_event) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t a = new_stream(1), b = new_stream(1);
  ca_event_t ea = new_event(be, 0), eb = new_event(be, 0), late = new_event(be, 0);
  OK(be->event_record(ea, a));
  OK(ca_sim_stream_wait_event(b, ea));
  OK(be->event_record(eb, b));
  OK(be->event_record(late, a)); /* after the wait: not waited for */
  ca_sim_stream_complete(b);
  DONE(be, eb);
  DONE(be, ea);
  PENDING(be, late);
  BREAKS_RULE(ca_sim_stream_wait_event(b, (ca_event_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
}

// ----------------------------------------------------------------------------
// Capture
// ----------------------------------------------------------------------------

/* Before: a query or a wait during another stream's capture succeeded and
 * the capture went on as if nothing had happened. */
Test(sim_streams, waiting_during_a_capture_invalidates_it) {
  SKIP_ON_CUDA("simulates capture");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(1), other = new_stream(1);
  ca_event_t e = new_event(be, 0);
  OK(be->event_record(e, other));
  ca_sim_set_capturing(s, 1);
  cr_assert_eq(ca_sim_capture_invalidated(s), 0);
  int c;
  OK(be->is_capturing(other, &c)); /* asking is allowed */
  cr_assert_eq(ca_sim_capture_invalidated(s), 0);
  BREAKS_RULE(be->event_query(e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  cr_assert_eq(ca_sim_capture_invalidated(s), 1);
  BREAKS_RULE(be->event_sync(e), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  BREAKS_RULE(be->stream_sync(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ca_sim_set_capturing(s, 0);
  cr_assert_eq(ca_sim_capture_invalidated(s), 0);
  PENDING(be, e); /* nothing was completed by the refused calls */
  OK(be->event_sync(e));
}

Test(sim_streams, capture_is_reported_and_never_synchronized) {
  SKIP_ON_CUDA("simulates capture");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  ca_stream_t s = new_stream(1), other = new_stream(1);
  ca_event_t e = new_event(be, 0);
  int c = -1;
  ca_sim_set_capturing(s, 1);
  OK(be->is_capturing(s, &c));
  cr_assert_eq(c, 1);
  OK(be->is_capturing(other, &c));
  cr_assert_eq(c, 0);
  BREAKS_RULE(be->stream_sync(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  BREAKS_RULE(be->device_sync(0), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  OK(be->event_record(e, s));
  BREAKS_RULE(be->event_query(e), CUDA_ERROR_CAPTURED_EVENT);
  BREAKS_RULE(be->event_sync(e), CUDA_ERROR_CAPTURED_EVENT);
  ca_sim_set_capturing(s, 0);
  OK(be->is_capturing(s, &c));
  cr_assert_eq(c, 0);
  OK(be->event_record(e, s));
  PENDING(be, e);
  OK(be->stream_sync(s));
  DONE(be, e);
}

// ----------------------------------------------------------------------------
// Threads
// ----------------------------------------------------------------------------

#define THREADS 4
#define ROUNDS 300

static void *record_and_complete(void *arg) {
  const ca_backend_t *be = arg;
  ca_stream_t s;
  ca_event_t e;
  int dev;
  if (be->get_device(&dev) || ca_sim_stream_create(&s, 0) || be->event_create(0, &e)) return (void *)1;
  for (int i = 0; i < ROUNDS; i++) {
    if (be->event_record(e, i % 3 ? s : NULL)) return (void *)2;
    if (i % 5 == 0) ca_sim_stream_complete(s);
    CUresult rc = be->event_query(e);
    if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_READY) return (void *)3;
    if (i % 7 == 0 && be->event_sync(e)) return (void *)4;
  }
  if (be->stream_sync(s) || ca_sim_stream_destroy(s) || be->event_destroy(e)) return (void *)5;
  return NULL;
}

Test(sim_streams, threads_record_and_wait_at_once) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start(MANUAL, NULL);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    cr_assert_eq(pthread_create(&t[i], NULL, record_and_complete, (void *)be), 0);
  for (int i = 0; i < THREADS; i++) {
    void *res;
    pthread_join(t[i], &res);
    cr_assert_null(res, "thread %d failed at step %p", i, res);
  }
  OK(be->device_sync(0));
  cr_assert_eq(ca_sim_calls(CA_OP_event_record), THREADS * ROUNDS);
}
