/* The event log's clock (alloc/trace_clock.c, docs/trace.md "The clock"):
 * the times a reader converts from the raw clock (the TSC where it is
 * invariant, else CLOCK_MONOTONIC) fall between CLOCK_MONOTONIC readings
 * taken around each call, over sleeps of 20 ms, and grow on each thread.
 * The check is shown to fail with a wrong calibration: the test build's
 * trace_clock_bad_scale makes the log's calibration pairs say 1.5 times
 * the time that passed. */
#include "core_testing.h"

#include <time.h>
#include <unistd.h>

#include "trace_read.h"

#define CALLS 6
#define SLEEP_US 20000
#define TOLERANCE_NS 200000   /* 0.2 ms: the calibration is good to far less; a wrong scale is off by ms */

static char log_path[256];

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Records CALLS allocations (sizes 1000 + i) between CLOCK_MONOTONIC
 * readings, each offset by the log's start; returns the log, read. */
static void record(uint64_t before[CALLS], uint64_t after[CALLS], ca_trace_data_t *t) {
  snprintf(log_path, sizeof log_path, "/tmp/cudalloc-trace-clock-%d.log", (int)getpid());
  char conf[300];
  snprintf(conf, sizeof conf, "trace:%s", log_path);
  core_start(conf);
  void *p[CALLS];
  for (int i = 0; i < CALLS; i++) {
    usleep(SLEEP_US);
    before[i] = mono_ns() - ca_trace_clock_mono0;
    cr_assert_eq(cudalloc_malloc(&p[i], 1000 + (size_t)i, NULL), cudaSuccess);
    after[i] = mono_ns() - ca_trace_clock_mono0;
  }
  for (int i = 0; i < CALLS; i++) cr_assert_eq(cudalloc_free(p[i], NULL), cudaSuccess);
  cudalloc_shutdown();
  char err[512];
  cr_assert_eq(ca_trace_read(log_path, t, err, sizeof err), 0, "%s", err);
  unlink(log_path);
}

/* How many of the allocations' converted times fall outside [before -
 * tolerance, after + tolerance], or go back on their thread; each said in
 * why. */
static int clock_errors(const ca_trace_data_t *t, const uint64_t before[CALLS], const uint64_t after[CALLS],
                        char *why, size_t cap) {
  int bad = 0, found = 0;
  size_t n = 0;
  uint64_t last[2] = {0, 0};   /* per thread: (tid, time) of the last event seen */
  for (size_t k = 0; k < t->nevents; k++) {
    const ca_trace_event_t *e = &t->events[k];
    if (e->thread == last[0] && e->time_ns <= last[1]) {
      bad++;
      n += (size_t)snprintf(why + n, n < cap ? cap - n : 0, "event %zu goes back on its thread; ", k);
    }
    last[0] = e->thread, last[1] = e->time_ns;
    if (e->kind != CA_EV_ALLOC || e->size < 1000 || e->size >= 1000 + CALLS) continue;
    int i = (int)(e->size - 1000);
    found++;
    if (e->time_ns + TOLERANCE_NS < before[i] || e->time_ns > after[i] + TOLERANCE_NS) {
      bad++;
      n += (size_t)snprintf(why + n, n < cap ? cap - n : 0, "call %d at %llu ns, CLOCK_MONOTONIC says %llu..%llu; ",
                            i, (unsigned long long)e->time_ns, (unsigned long long)before[i],
                            (unsigned long long)after[i]);
    }
  }
  if (found != CALLS) {
    bad++;
    n += (size_t)snprintf(why + n, n < cap ? cap - n : 0, "%d of the %d allocations in the log; ", found, CALLS);
  }
  return bad;
}

static void expect_clock_right(bool monotonic) {
  ca_debug.trace_clock_monotonic = monotonic;
  uint64_t before[CALLS], after[CALLS];
  ca_trace_data_t t;
  record(before, after, &t);
  if (monotonic) cr_expect_eq(t.header.clock, CA_TRACE_CLOCK_MONOTONIC);
  cr_log_info("clock %s", t.header.clock == CA_TRACE_CLOCK_TSC ? "tsc" : "monotonic");
  char why[2048] = "";
  cr_expect_eq(clock_errors(&t, before, after, why, sizeof why), 0, "%s", why);
  ca_trace_data_free(&t);
}

TestSuite(trace_clock, .fini = core_fini, .timeout = 60);

/* The TSC where this machine's is invariant (and the kernel's clock
 * source), else CLOCK_MONOTONIC itself. */
Test(trace_clock, converted_times_follow_clock_monotonic) { expect_clock_right(false); }

Test(trace_clock, the_monotonic_fallback_follows_it_too) { expect_clock_right(true); }

/* The check above, with calibration pairs that say 1.5 times the time
 * that passed: the converted times run 1.5 times too fast and fall out of
 * the CLOCK_MONOTONIC windows (by 10 ms and more after 20 ms of sleep). */
Test(trace_clock, a_wrong_calibration_fails_the_check) {
  ca_debug.trace_clock_bad_scale = true;
  uint64_t before[CALLS], after[CALLS];
  ca_trace_data_t t;
  record(before, after, &t);
  char why[2048] = "";
  cr_expect_geq(clock_errors(&t, before, after, why, sizeof why), CALLS, "a wrong scale went unnoticed: %s", why);
  cr_expect(strstr(why, "CLOCK_MONOTONIC says"), "%s", why);
  cr_log_info("caught: %.300s", why);
  ca_trace_data_free(&t);
}
