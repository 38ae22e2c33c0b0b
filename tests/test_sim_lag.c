/* sim_events:lag: work completes by itself, but only some device calls
 * after it was issued (k in [1, sim_lag_ops], drawn from sim_seed), in
 * stream order, or at once when something waits for it. */
#include "sim_testing.h"

TestSuite(sim_lag, .fini = sim_fini);

#define DONE(be, e) cr_assert_eq((be)->event_query(e), CUDA_SUCCESS, "%s is not complete", #e)
#define PENDING(be, e) cr_assert_eq((be)->event_query(e), CUDA_ERROR_NOT_READY, "%s completed", #e)

static ca_event_t new_event(const ca_backend_t *be) {
  ca_event_t e;
  OK(be->event_create(0, &e));
  return e;
}

static ca_stream_t new_stream(int nonblocking) {
  ca_stream_t s;
  OK(ca_sim_stream_create(&s, nonblocking));
  return s;
}

/* Device calls (queries) until e completes by itself. */
static int calls_until_done(const ca_backend_t *be, ca_event_t e) {
  int n = 1;
  while (be->event_query(e) == CUDA_ERROR_NOT_READY) {
    n++;
    cr_assert_lt(n, 1000, "lagging work never completed");
  }
  return n;
}

Test(sim_lag, work_completes_between_one_and_n_calls_later) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:5", NULL);
  ca_stream_t s = new_stream(1);
  ca_event_t e = new_event(be);
  int seen[7] = {0};
  for (int i = 0; i < 300; i++) {
    OK(be->event_record(e, s));
    int n = calls_until_done(be, e);
    /* the first query (one call later at most) finds it pending when k > 1;
     * the query that finds it done is the k-th call after the record, +1 */
    cr_assert(n >= 2 && n <= 6, "completed after %d calls", n);
    seen[n]++;
  }
  for (int n = 2; n <= 6; n++) cr_assert_gt(seen[n], 0, "k = %d was never drawn", n - 1);
}

/* The record of lags of one seed: what makes a failing run reproducible. */
static void lags(const char *conf, int *out, int n) {
  const ca_backend_t *be = sim_start(conf, NULL);
  ca_stream_t s = new_stream(1);
  ca_event_t e = new_event(be);
  for (int i = 0; i < n; i++) {
    OK(be->event_record(e, s));
    out[i] = calls_until_done(be, e);
  }
  ca_sim_shutdown();
}

Test(sim_lag, a_seed_fixes_the_lags) {
  SKIP_ON_CUDA("controls simulated time");
  int a[64], b[64], c[64];
  lags("backend:sim,sim_events:lag,sim_lag_ops:16,sim_seed:7", a, 64);
  lags("backend:sim,sim_events:lag,sim_lag_ops:16,sim_seed:7", b, 64);
  lags("backend:sim,sim_events:lag,sim_lag_ops:16,sim_seed:8", c, 64);
  cr_assert_arr_eq(a, b, sizeof a, "one seed gave two runs");
  cr_assert(memcmp(a, c, sizeof a) != 0, "two seeds gave one run");
}

Test(sim_lag, lagging_work_completes_in_stream_order) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:50", NULL);
  ca_stream_t s = new_stream(1);
  ca_event_t first[40], last = new_event(be);
  for (int i = 0; i < 40; i++) {
    first[i] = new_event(be);
    OK(be->event_record(first[i], s));
  }
  OK(be->event_record(last, s));
  calls_until_done(be, last);
  for (int i = 0; i < 40; i++) DONE(be, first[i]); /* done before last, whatever their draws */
}

Test(sim_lag, waiting_completes_at_once) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:1000", NULL);
  ca_stream_t s = new_stream(1), t = new_stream(1);
  ca_event_t a = new_event(be), b = new_event(be), c = new_event(be);
  OK(be->event_record(a, s));
  OK(be->event_record(b, t));
  OK(be->event_record(c, NULL));
  PENDING(be, a);
  OK(be->event_sync(a));
  DONE(be, a);
  PENDING(be, b);
  OK(be->stream_sync(t));
  DONE(be, b);
  PENDING(be, c);
  OK(be->device_sync(0));
  DONE(be, c);
}

/* The legacy stream's implicit waits hold in lag mode: legacy work that
 * completes by itself has waited for earlier work on blocking streams. */
Test(sim_lag, lagging_legacy_work_completes_earlier_blocking_work) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:3", NULL);
  for (int i = 0; i < 50; i++) {
    ca_stream_t s = new_stream(0);
    ca_event_t es = new_event(be), el = new_event(be);
    ca_sim_set_events(CA_SIM_EVENTS_MANUAL, 0);
    OK(be->event_record(es, s)); /* pending until something completes it */
    ca_sim_set_events(CA_SIM_EVENTS_LAG, 0);
    OK(be->event_record(el, NULL));
    calls_until_done(be, el);
    DONE(be, es);
    OK(be->event_destroy(es));
    OK(be->event_destroy(el));
    OK(ca_sim_stream_destroy(s));
  }
}

/* Touches lag like any work: pending, then gone without a wait. */
Test(sim_lag, touches_lag_too) {
  SKIP_ON_CUDA("controls simulated time");
  ca_phys_t h;
  size_t g;
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:4", &g);
  char *p = sim_mapped(be, 0, g, g, &h);
  ca_stream_t s = new_stream(1);
  OK(ca_sim_touch(s, p, g, 1));
  cr_assert_eq(ca_sim_pending_touches(), 1);
  int dev;
  for (int i = 0; i < 5; i++) OK(be->get_device(&dev)); /* not a clock tick: no lock taken */
  cr_assert_eq(ca_sim_pending_touches(), 1);
  ca_event_t e = new_event(be);
  OK(be->event_record(e, NULL));
  calls_until_done(be, e);
  for (int i = 0; i < 5; i++) (void)be->event_query(e);
  cr_assert_eq(ca_sim_pending_touches(), 0);
}

Test(sim_lag, the_configuration_and_the_control_agree) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim", NULL);
  ca_stream_t s = new_stream(1);
  ca_event_t e = new_event(be);
  OK(be->event_record(e, s));
  DONE(be, e); /* auto */
  ca_sim_set_events(CA_SIM_EVENTS_LAG, 2);
  OK(be->event_record(e, s));
  PENDING(be, e);
  int n = calls_until_done(be, e);
  cr_assert(n >= 1 && n <= 2, "lagged %d calls with sim_lag_ops 2", n);
  ca_sim_set_events(CA_SIM_EVENTS_LAG, 0);
  OK(be->event_record(e, s));
  ca_sim_set_events(CA_SIM_EVENTS_AUTO, 0); /* back to auto completes what is pending */
  DONE(be, e);
}

/* Before: the simulated runtime asked by recording a new event, which is
 * itself pending in manual and lag modes, so cudaStreamQuery after an
 * event synchronize answered "not ready" (tests/progs/ptsz.c failed). */
Test(sim_lag, a_stream_query_asks_about_issued_work_only) {
  SKIP_ON_CUDA("controls simulated time");
  const ca_backend_t *be = sim_start("backend:sim,sim_events:lag,sim_lag_ops:6", NULL);
  ca_stream_t s = new_stream(1);
  cr_assert_eq(ca_sim_stream_query(s), CUDA_SUCCESS, "nothing issued yet");
  ca_event_t e = new_event(be);
  OK(be->event_record(e, s));
  cr_assert_eq(ca_sim_stream_query(s), CUDA_ERROR_NOT_READY);
  OK(be->event_sync(e));
  cr_assert_eq(ca_sim_stream_query(s), CUDA_SUCCESS);
  OK(be->event_record(e, s));
  int polls = 1;
  while (ca_sim_stream_query(s) == CUDA_ERROR_NOT_READY) cr_assert_lt(++polls, 100, "polling never ends");
  cr_assert_leq(polls, 7);
  BREAKS_RULE(ca_sim_stream_query((ca_stream_t)0x1234), CUDA_ERROR_INVALID_HANDLE);
}
