/* The reuse oracle seen from a preloaded program: the simulated runtime's
 * asynchronous fills and copies are device work on their stream, and a
 * synchronous copy of bytes such work still writes is reported, with the
 * copy's and the fill's call sites in the program. */
#include "test_shim.h"

#define CONF "backend:sim,sim_capacity_mb:64,sim_events:manual"

Test(sim_preload, a_copy_racing_a_fill_is_reported_once) {
  shim_run_t *r = shim_prog("oracle_race", NULL, CONF);
  cr_assert_eq(r->status, 0, "oracle_race exited with %d:\n%s", r->status, r->out);
  cr_assert_not_null(strstr(r->out, "oracle_race: ok"), "%s", r->out);
  const char *v = strstr(r->out, "reuse oracle: a host read");
  cr_assert_not_null(v, "the race was not reported:\n%s", r->out);
  cr_assert_lt(v, strstr(r->out, "oracle_race: raced"), "reported at the wrong call:\n%s", r->out);
  cr_assert_not_null(strstr(v, "pending write"), "%s", r->out);
  cr_assert_eq(strstr(v + 1, "reuse oracle:"), NULL, "more than one report:\n%s", r->out);
  cr_assert_not_null(strstr(v, "at oracle_race+"), "the program's call sites are missing:\n%s", r->out);
}

/* In auto mode the fill is complete at once: nothing to report. */
Test(sim_preload, auto_mode_has_nothing_pending) {
  shim_run_t *r = shim_prog("oracle_race", NULL, "backend:sim,sim_capacity_mb:64,sim_events:auto");
  shim_assert_ok(r, "oracle_race");
  shim_assert_lacks(r, "reuse oracle");
}

/* tests/progs/legacy_queue.c through the shim: a single-stream
 * cudaMalloc/cudaFree loop whose fills still run makes no event call
 * after its warm-up (legacy_queue:auto), the shim's stream creation ends
 * the mode with one synchronization, and the same loop then waits for
 * events; the oracle, watching the fills, reports nothing. */
Test(sim_preload, a_single_stream_loop_makes_no_event_call_until_a_stream_appears) {
  shim_run_t *r = shim_prog("legacy_queue", NULL, "backend:sim,sim_events:lag");
  shim_assert_ok(r, "legacy_queue");
  shim_assert_lacks(r, "reuse oracle");
  long long single = -1, at_creation = -1, two = -1;
  const char *a = strstr(r->out, "single-stream event calls ");
  const char *b = strstr(r->out, "synchronizations at the stream's creation ");
  const char *c = strstr(r->out, "two-stream event calls ");
  cr_assert(a && b && c, "%s", r->out);
  single = atoll(a + strlen("single-stream event calls "));
  at_creation = atoll(b + strlen("synchronizations at the stream's creation "));
  two = atoll(c + strlen("two-stream event calls "));
  cr_assert_eq(single, 0, "event calls in steps 5..19 on the legacy stream alone:\n%s", r->out);
  cr_assert_eq(at_creation, 1, "%s", r->out);
  cr_assert_gt(two, 0, "cudaFree waits for events again:\n%s", r->out);
}

/* legacy_queue:off: the same loop pays events from the start (the loop
 * before the legacy queue). */
Test(sim_preload, with_legacy_queue_off_the_loop_makes_event_calls) {
  shim_run_t *r = shim_prog("legacy_queue", NULL, "backend:sim,sim_events:lag,legacy_queue:off");
  shim_assert_ok(r, "legacy_queue");
  shim_assert_lacks(r, "reuse oracle");
  const char *a = strstr(r->out, "single-stream event calls ");
  cr_assert_not_null(a, "%s", r->out);
  cr_assert_gt(atoll(a + strlen("single-stream event calls ")), 0, "%s", r->out);
}

static long long figure(const shim_run_t *r, const char *label) {
  const char *at = strstr(r->out, label);
  cr_assert_not_null(at, "no \"%s\" in:\n%s", label, r->out);
  return atoll(at + strlen(label));
}

/* A blocking copy to the host, with the legacy stream the only one: the
 * block freed before it (its fill may still run before the copy) is free
 * after it, and no event was recorded or queried. */
Test(sim_preload, a_copy_to_the_host_settles_the_frees_before_it) {
  shim_run_t *r = shim_prog("legacy_queue", "copy", "backend:sim,sim_events:manual");
  shim_assert_ok(r, "legacy_queue");
  shim_assert_lacks(r, "reuse oracle");
  cr_assert_eq(figure(r, "pending before the copy "), 4 << 20, "%s", r->out);
  cr_assert_eq(figure(r, ", after "), 0, "%s", r->out);
  cr_assert_eq(figure(r, ", event calls "), 0, "%s", r->out);
}

/* cudaMemcpy_ptds is how a program built with --default-stream per-thread
 * copies: per-thread streams are in use, and the mode ends there. */
Test(sim_preload, a_per_thread_copy_ends_the_legacy_queue) {
  shim_run_t *r = shim_prog("legacy_queue", "ptds", "backend:sim,sim_events:lag");
  shim_assert_ok(r, "legacy_queue");
  shim_assert_lacks(r, "reuse oracle");
  cr_assert_eq(figure(r, "synchronizations at the per-thread copy "), 1, "%s", r->out);
  cr_assert_gt(figure(r, "per-thread event calls "), 0, "%s", r->out);
}

/* A kernel launched on cudaStreamPerThread (a program built with
 * --default-stream per-thread launches all its kernels there) ends the
 * legacy queue before it is issued: one synchronization. */
Test(sim_preload, a_per_thread_launch_ends_the_legacy_queue) {
  shim_run_t *r = shim_prog("legacy_queue", "launch", "backend:sim,sim_events:lag");
  shim_assert_ok(r, "legacy_queue");
  cr_assert_eq(figure(r, "synchronizations at the per-thread launch "), 1, "%s", r->out);
}
