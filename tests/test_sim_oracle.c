/* The reuse oracle at the backend: work that touches memory stays pending
 * until its stream gets there, and a hand-out, a host access, a map, an
 * unmap or a release that pending work can still reach is a violation,
 * reported with both call sites. Every test that provokes one checks it
 * and forgets it (ca_sim_oracle_reset), so that sim_fini's check stays
 * meaningful for the others. */
#define _GNU_SOURCE
#include "sim_testing.h"

#include <criterion/redirect.h>
#include <dlfcn.h>
#include <pthread.h>

#define MANUAL "backend:sim,sim_events:manual"

TestSuite(sim_oracle, .init = cr_redirect_stderr, .fini = sim_fini);

static ca_stream_t new_stream(int nonblocking) {
  ca_stream_t s;
  OK(ca_sim_stream_create(&s, nonblocking));
  return s;
}

/* What the test wrote to stderr so far. */
static const char *captured_stderr_text(void) {
  static char buf[1 << 14];
  fflush(stderr);
  size_t n = fread(buf, 1, sizeof buf - 1, cr_get_redirected_stderr());
  buf[n] = 0;
  return buf;
}

/* Two call sites the report can name: functions libc exports. */
static void *site_a(void) { return dlsym(RTLD_DEFAULT, "qsort"); }
static void *site_b(void) { return dlsym(RTLD_DEFAULT, "bsearch"); }

/* Exactly n violations so far, the first mentioning every string of want
 * (NULL-terminated); then forgotten. */
static void expect_violations(uint64_t n, const char *const *want) {
  cr_assert_eq(ca_sim_oracle_violations(), n, "%llu violations, not %llu; the first: %s",
               (unsigned long long)ca_sim_oracle_violations(), (unsigned long long)n, ca_sim_oracle_report(0));
  for (int i = 0; want && want[i]; i++)
    cr_assert_not_null(strstr(ca_sim_oracle_report(0), want[i]), "\"%s\" missing from: %s", want[i],
                       ca_sim_oracle_report(0));
  ca_sim_oracle_reset();
}

typedef struct {
  const ca_backend_t *be;
  size_t g;
  char *p;
  ca_phys_t h;
} fixture_t;

static fixture_t start(const char *conf) {
  fixture_t d;
  d.be = sim_start(conf, &d.g);
  d.p = sim_mapped(d.be, 0, 4 * d.g, 4 * d.g, &d.h);
  return d;
}

// ----------------------------------------------------------------------------
// Hand-outs
// ----------------------------------------------------------------------------

Test(sim_oracle, a_block_for_any_stream_over_pending_work_names_both_sites) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t s = new_stream(1);
  OK(ca_sim_touch_at(s, d.p + 100, 50, 1, site_b()));
  d.be->check_handout((uintptr_t)d.p, 128, NULL, false, site_a());
  Dl_info a, b;
  cr_assert(dladdr(site_a(), &a) && a.dli_sname && dladdr(site_b(), &b) && b.dli_sname);
  char at_a[128], at_b[128];
  snprintf(at_a, sizeof at_a, "handed out at %s+0", a.dli_sname); /* a sanitizer's interceptor, maybe */
  snprintf(at_b, sizeof at_b, "issued at %s+0", b.dli_sname);
  const char *want[] = {at_a, at_b, "pending write", "any stream", NULL};
  expect_violations(1, want);
  cr_assert_not_null(strstr(captured_stderr_text(), "reuse oracle:"), "the violation was not printed");
}

Test(sim_oracle, completed_work_and_other_bytes_are_fine) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t s = new_stream(1);
  OK(ca_sim_touch(s, d.p, 64, 1));
  d.be->check_handout((uintptr_t)d.p + 64, 64, NULL, false, site_a()); /* the next bytes */
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  OK(d.be->stream_sync(s));
  cr_assert_eq(ca_sim_pending_touches(), 0);
  d.be->check_handout((uintptr_t)d.p, 64, NULL, false, site_a());
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(sim_oracle, auto_mode_leaves_nothing_pending) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start("backend:sim");
  OK(ca_sim_touch(NULL, d.p, d.g, 1));
  cr_assert_eq(ca_sim_pending_touches(), 0);
  d.be->check_handout((uintptr_t)d.p, d.g, NULL, false, site_a());
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

/* One touch on `on`, then a stream-ordered hand-out for `for_`: a
 * violation unless the touch is ordered before new work on for_. */
static uint64_t ordered_case(fixture_t *d, ca_stream_t on, ca_stream_t for_) {
  OK(ca_sim_touch(on, d->p, 64, 1));
  d->be->check_handout((uintptr_t)d->p, 64, for_, true, site_a());
  uint64_t v = ca_sim_oracle_violations();
  ca_sim_oracle_reset();
  ca_sim_complete_all();
  return v;
}

Test(sim_oracle, a_stream_ordered_block_may_overlap_only_work_ordered_before_its_stream) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t nb = new_stream(1), nb2 = new_stream(1), bl = new_stream(0), bl2 = new_stream(0);
  cr_assert_eq(ordered_case(&d, nb, nb), 0, "its own stream's earlier work");
  cr_assert_eq(ordered_case(&d, nb, nb2), 1, "another non-blocking stream");
  cr_assert_eq(ordered_case(&d, nb, NULL), 1, "the legacy stream does not wait for non-blocking ones");
  cr_assert_eq(ordered_case(&d, bl, NULL), 0, "the legacy stream waits for blocking ones");
  cr_assert_eq(ordered_case(&d, NULL, bl), 0, "blocking streams wait for the legacy one");
  cr_assert_eq(ordered_case(&d, bl, bl2), 1, "two blocking streams do not wait for each other");
  cr_assert_eq(ordered_case(&d, NULL, nb), 1, "non-blocking streams do not wait for the legacy one");
  cr_assert_eq(ordered_case(&d, bl, CA_STREAM_PER_THREAD), 1, "per-thread and blocking are unordered");
  cr_assert_eq(ordered_case(&d, CA_STREAM_PER_THREAD, NULL), 0, "legacy waits for per-thread");
  cr_assert_eq(ordered_case(&d, nb, (ca_stream_t)0x1234), 1, "an unknown stream orders nothing");
}

/* Through the legacy stream twice: bl's work, then legacy work, then bl2:
 * bl2 waits for the legacy work, which waited for bl's. */
Test(sim_oracle, order_is_transitive) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t bl = new_stream(0), bl2 = new_stream(0);
  ca_event_t e;
  OK(ca_sim_touch(bl, d.p, 64, 1));
  OK(d.be->event_create(0, &e));
  OK(d.be->event_record(e, NULL));
  d.be->check_handout((uintptr_t)d.p, 64, bl2, true, site_a());
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(sim_oracle, an_event_wait_orders_streams) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t a = new_stream(1), b = new_stream(1);
  ca_event_t before, after;
  OK(d.be->event_create(0, &before));
  OK(d.be->event_create(0, &after));
  OK(d.be->event_record(before, a));
  OK(ca_sim_touch(a, d.p, 64, 1));
  OK(d.be->event_record(after, a));
  OK(ca_sim_stream_wait_event(b, before)); /* recorded before the touch: not enough */
  d.be->check_handout((uintptr_t)d.p, 64, b, true, site_a());
  expect_violations(1, NULL);
  OK(ca_sim_stream_wait_event(b, after));
  d.be->check_handout((uintptr_t)d.p, 64, b, true, site_a());
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

static void *hand_out_on_own_per_thread_stream(void *arg) {
  fixture_t *d = arg;
  ca_sim_thread_init();
  d->be->check_handout((uintptr_t)d->p, 64, CA_STREAM_PER_THREAD, true, site_a());
  return NULL;
}

Test(sim_oracle, per_thread_streams_of_two_threads_are_unordered) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  OK(ca_sim_touch(CA_STREAM_PER_THREAD, d.p, 64, 1));
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, hand_out_on_own_per_thread_stream, &d), 0);
  pthread_join(t, NULL);
  expect_violations(1, (const char *[]){"per-thread stream", NULL});
  d.be->check_handout((uintptr_t)d.p, 64, CA_STREAM_PER_THREAD, true, site_a()); /* this thread's */
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

// ----------------------------------------------------------------------------
// Host accesses, maps, unmaps, releases
// ----------------------------------------------------------------------------

Test(sim_oracle, host_access_to_pending_memory) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t s = new_stream(1);
  OK(ca_sim_touch(s, d.p, 64, 0));
  ca_sim_host_access(d.p, 64, 0, site_a()); /* reads beside a pending read */
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  ca_sim_host_access(d.p + 32, 64, 1, site_a());
  expect_violations(1, (const char *[]){"host write", "pending read", NULL});
  OK(ca_sim_touch(s, d.p + d.g, 64, 1));
  ca_sim_host_access(d.p + d.g + 63, 1, 0, site_a());
  expect_violations(1, (const char *[]){"host read", "pending write", NULL});
}

Test(sim_oracle, unmap_and_release_of_pending_pages) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t s = new_stream(1);
  OK(ca_sim_touch(s, d.p + d.g, 8, 1));
  OK(d.be->unmap((uintptr_t)d.p, 4 * d.g));
  expect_violations(1, (const char *[]){"unmap", NULL});
  OK(d.be->release(d.h));
  expect_violations(1, (const char *[]){"release of handle", NULL});
  ca_phys_t h2;
  OK(d.be->create(0, 4 * d.g, &h2));
  OK(d.be->map((uintptr_t)d.p, 4 * d.g, h2, 0));
  expect_violations(1, (const char *[]){"map", NULL});
  OK(d.be->stream_sync(s));
  OK(d.be->unmap((uintptr_t)d.p, 4 * d.g));
  OK(d.be->release(h2));
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

// ----------------------------------------------------------------------------
// Touches themselves
// ----------------------------------------------------------------------------

static void *touch_without_a_context(void *arg) {
  fixture_t *d = arg;
  return (void *)(uintptr_t)ca_sim_touch(NULL, d->p, 8, 1);
}

Test(sim_oracle, touches_follow_the_drivers_rules) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  char host[64];
  uintptr_t va;
  OK(d.be->reserve(0, d.g, &va)); /* reserved, never mapped */
  BREAKS_RULE(ca_sim_touch(NULL, (void *)va, 8, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
  BREAKS_RULE(ca_sim_touch(NULL, d.p + 4 * d.g - 8, 16, 1), CUDA_ERROR_ILLEGAL_ADDRESS); /* past the end */
  BREAKS_RULE(ca_sim_touch((ca_stream_t)0x1234, d.p, 8, 1), CUDA_ERROR_INVALID_HANDLE);
  BREAKS_RULE(ca_sim_touch(NULL, (void *)UINTPTR_MAX, 8, 1), CUDA_ERROR_INVALID_VALUE);
  OK(ca_sim_touch(NULL, host, sizeof host, 1)); /* host memory: not the device's */
  OK(ca_sim_touch(NULL, d.p, 0, 1));
  cr_assert_eq(ca_sim_pending_touches(), 0);
  pthread_t t;
  void *rc;
  cr_assert_eq(pthread_create(&t, NULL, touch_without_a_context, &d), 0);
  pthread_join(t, &rc);
  cr_assert_eq((CUresult)(uintptr_t)rc, CUDA_ERROR_INVALID_CONTEXT);
}

Test(sim_oracle, a_capturing_stream_runs_nothing) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  ca_stream_t s = new_stream(1);
  ca_sim_set_capturing(s, 1);
  OK(ca_sim_touch(s, d.p, 8, 1));
  cr_assert_eq(ca_sim_pending_touches(), 0);
  ca_sim_set_capturing(s, 0);
}

Test(sim_oracle, the_record_outlives_a_shutdown_and_reset_forgets_it) {
  SKIP_ON_CUDA("the simulated device's oracle");
  fixture_t d = start(MANUAL);
  OK(ca_sim_touch(NULL, d.p, 8, 1));
  d.be->check_handout((uintptr_t)d.p, 8, NULL, false, site_a());
  ca_sim_shutdown();
  cr_assert_eq(ca_sim_oracle_violations(), 1);
  cr_assert_not_null(ca_sim_oracle_report(0));
  cr_assert_null(ca_sim_oracle_report(1));
  ca_sim_oracle_reset();
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  cr_assert_null(ca_sim_oracle_report(0));
}
