/* The fronts' inline tries (tcache.h: ca_tcache_hit_inline,
 * ca_tcache_give_inline) make the full try's checks without a call: the
 * request's device against its stream's, roundup_power2_divisions' rounding,
 * a capture underway. The inline hit runs where the call site is known
 * without a call (track:off, track:caller, and track:stack, the default,
 * once the thread's stack memo knows the stack): here each check is
 * reached through the default's memo, and
 * each test fails with its check taken out of the inline try (the device
 * compare, the divisions test) or out of what the tries rely on (the calm
 * word's stir by a capture and by the event log). */
#include <criterion/criterion.h>

#include "tcache_testing.h"

#include <stdio.h>
#include <unistd.h>

#include "trace.h"

TestSuite(core_tcache_inline, .fini = tcache_fini);

#define SMALL 1000   /* a small class, cached whole */

/* One allocating call site (never inlined, never a tail call), so that a
 * cached block's site is the next request's. */
static __attribute__((noinline)) CUresult alloc_at(int dev, void **p, size_t size, ca_stream_t s) {
  CUresult rc = ca_malloc_on(dev, p, size, s, CA_ALLOC_ASYNC, __builtin_return_address(0));
  __asm__ volatile("" ::: "memory");
  return rc;
}

typedef struct {
  int dev_last;            /* the last request's device (-1: the stream's) */
  void (*before_last)(void);
} last_t;

static void no_hook(void) {}

/* n requests of size on s from one stack, each but the last freed at once
 * on s: the last one's answer, *p, and whether it was a front-cache hit.
 * The memo must have answered the last one (else the inline try did not
 * run, and the test would prove nothing). */
static __attribute__((noinline)) CUresult cycle(ca_stream_t s, size_t size, int n, last_t last, void **p, bool *hit) {
  CUresult rc = CUDA_SUCCESS;
  uint64_t hits = 0, memo = 0;
  for (int r = 0; r < n; r++) {
    int dev = -1;
    void (*hook)(void) = no_hook;
    if (opaque(r) == n - 1) {
      dev = last.dev_last;
      if (last.before_last) hook = last.before_last;
    }
    hook();
    hits = ca_debug.tcache_hits, memo = ca_debug.stackwalk_memo_hits;
    *p = NULL;
    rc = alloc_at(dev, p, size, s);
    if (opaque(r) != n - 1) cr_assert_eq(ca_free(*p, s), CUDA_SUCCESS, "round %d", r);
  }
  cr_assert_gt(ca_debug.stackwalk_memo_hits, memo, "the memo knew the last request's stack: the inline try ran");
  *hit = ca_debug.tcache_hits - hits == 1;
  return rc;
}

/* Which tracking modes a cached request hits in without the front's full
 * try (malloc_full): off (no site), caller (the return address) and a
 * stack the memo knows are answered inline (track.h,
 * ca_track_site_inline); backtrace, unwound at every allocation, only
 * through the full try. Before off and caller were answered inline, each of
 * their allocations took the full try, and the pair ran slower than the
 * default's (docs/benchmarks.md, seventeenth session): the first two tests
 * failed then. Returns whether the last of a few requests from one call
 * instruction on one stream, a hit, went through the full try. */
static __attribute__((noinline)) bool a_hit_took_the_full_front(const char *track) {
  char conf[128];
  snprintf(conf, sizeof conf, "sim_events:auto,%s", track);
  core_start(conf);
  ca_stream_t a = new_stream();
  void *p = NULL;
  uint64_t full = 0, hits = 0;
  for (int r = 0; r < 5; r++) {
    if (opaque(r) == 4) full = ca_debug.full_fronts, hits = ca_debug.tcache_hits;
    p = NULL;
    cr_assert_eq(alloc_at(-1, &p, SMALL, a), CUDA_SUCCESS, "%s, round %d", track, r);
    if (opaque(r) != 4) cr_assert_eq(ca_free(p, a), CUDA_SUCCESS, "%s, round %d", track, r);
  }
  cr_assert_eq(ca_debug.tcache_hits - hits, 1, "%s: the last request was a hit", track);
  bool full_front = ca_debug.full_fronts != full;
  free_on(p, a);
  CHECK_CONSISTENT();
  return full_front;
}

Test(core_tcache_inline, track_off_hits_without_the_full_front) {
  cr_assert_not(a_hit_took_the_full_front("track:off"));
}

Test(core_tcache_inline, track_caller_hits_without_the_full_front) {
  cr_assert_not(a_hit_took_the_full_front("track:caller"));
}

Test(core_tcache_inline, track_stack_hits_without_the_full_front_once_the_memo_knows_the_stack) {
  cr_assert_not(a_hit_took_the_full_front("track:stack"));
}

/* The tally sees the full try where it runs: the check above can fail. */
Test(core_tcache_inline, track_backtrace_hits_through_the_full_front) {
  cr_assert(a_hit_took_the_full_front("track:backtrace"));
}

Test(core_tcache_inline, an_explicit_device_gets_no_hit_from_another_devices_stream) {
  core_start("sim_events:auto,sim_devices:2");
  ca_stream_t s1 = stream_of_device_1();
  void *p;
  bool hit;
  cr_assert_eq(cycle(s1, SMALL, 5, (last_t){1, NULL}, &p, &hit), CUDA_SUCCESS);
  cr_assert(hit, "its own device's request hits");
  cr_assert_eq(ca_free(p, s1), CUDA_SUCCESS);
  cr_assert_eq(cycle(s1, SMALL, 5, (last_t){0, NULL}, &p, &hit), CUDA_ERROR_INVALID_HANDLE, "device 0 on device 1's stream");
  cr_assert_not(hit, "no hit for the wrong device");
  cr_assert_null(p);
  CHECK_CONSISTENT();
}

/* With divisions the inline try leaves the class to the full try: the hit
 * is in the rounded size's class (33,000 bytes round to 40 KiB by fourths
 * of the octave), where the plain rounding's class (32.5 KiB) holds none. */
Test(core_tcache_inline, roundup_power2_divisions_hits_in_the_rounded_class) {
  core_start("sim_events:auto,roundup_power2_divisions:4");
  ca_stream_t a = new_stream();
  void *p;
  bool hit;
  cr_assert_eq(cycle(a, 33000, 5, (last_t){-1, NULL}, &p, &hit), CUDA_SUCCESS);
  cr_assert(hit, "the request hits in its rounded class");
  cr_assert_eq(stats0().allocated_bytes.current, 40 << 10);
  free_on(p, a);
  CHECK_CONSISTENT();
}

static void capture_begin_now(void) { ca_capture_begin(); }

/* During a capture the frees are held back and the cache is not used: a
 * block freed then is not cached, and a request then gets no hit. The
 * inline tries test no capture count: a capture stirs the calm word
 * (calm.h), and they run only while calm; the test switch
 * capture_leaves_calm takes the stir out. Returns whether the free during
 * the capture was cached. */
static bool a_free_during_a_capture_is_cached(bool leave_calm) {
  core_start("sim_events:auto");
  ca_debug.capture_leaves_calm = leave_calm;
  ca_stream_t a = new_stream();
  void *p;
  bool hit;
  cr_assert_eq(cycle(a, SMALL, 5, (last_t){-1, NULL}, &p, &hit), CUDA_SUCCESS);
  cr_assert(hit);
  int64_t cached = cached_bytes();
  ca_capture_begin();
  free_on(p, a);
  bool into_cache = cached_bytes() != cached;
  ca_capture_end();
  CHECK_CONSISTENT();
  return into_cache;
}

Test(core_tcache_inline, a_capture_stops_the_inline_free) {
  cr_assert_not(a_free_during_a_capture_is_cached(false), "the free during the capture went to the core");
}

Test(core_tcache_inline, a_capture_that_leaves_calm_lets_the_inline_free_in) {
  cr_assert(a_free_during_a_capture_is_cached(true), "the broken capture still stopped the inline free");
}

static bool a_request_during_a_capture_hits(bool leave_calm) {
  core_start("sim_events:auto");
  ca_debug.capture_leaves_calm = leave_calm;
  ca_stream_t a = new_stream();
  void *p;
  bool hit;
  cr_assert_eq(cycle(a, SMALL, 5, (last_t){-1, capture_begin_now}, &p, &hit), CUDA_SUCCESS);
  free_on(p, a);
  ca_capture_end();
  CHECK_CONSISTENT();
  return hit;
}

Test(core_tcache_inline, a_capture_stops_the_inline_hit) {
  cr_assert_not(a_request_during_a_capture_hits(false), "no hit during a capture");
}

Test(core_tcache_inline, a_capture_that_leaves_calm_lets_the_inline_hit_in) {
  cr_assert(a_request_during_a_capture_hits(true), "the broken capture still stopped the inline hit");
}

/* The same for the event log, whose hooks run under the device lock: once
 * it records again (resumed), a block the cache held while it was paused
 * is freed through the core (trace_leaves_calm: the resume does not stir).
 * Returns whether that free was cached. */
static bool a_free_while_the_log_records_is_cached(bool leave_calm) {
  char log[128];
  snprintf(log, sizeof log, "/tmp/cudalloc-tcache-inline-%d.log", (int)getpid());
  char conf[256];
  snprintf(conf, sizeof conf, "sim_events:auto,trace:%s", log);
  core_start(conf);
  ca_debug.trace_leaves_calm = leave_calm;
  ca_trace_pause();
  ca_stream_t a = new_stream();
  void *p;
  bool hit;
  cr_assert_eq(cycle(a, SMALL, 5, (last_t){-1, NULL}, &p, &hit), CUDA_SUCCESS);
  cr_assert(hit, "paused, the cache serves");
  int64_t cached = cached_bytes();
  ca_trace_resume();
  free_on(p, a);
  bool into_cache = cached_bytes() != cached;
  CHECK_CONSISTENT();
  unlink(log);   /* open until the suite's shutdown */
  return into_cache;
}

Test(core_tcache_inline, the_event_log_stops_the_inline_free) {
  cr_assert_not(a_free_while_the_log_records_is_cached(false), "the free while the log records went to the core");
}

Test(core_tcache_inline, an_event_log_that_leaves_calm_lets_the_inline_free_in) {
  cr_assert(a_free_while_the_log_records_is_cached(true), "the broken log still stopped the inline free");
}
