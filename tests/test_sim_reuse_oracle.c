/* The reuse oracle watching the real allocator: a kernel (a touch) uses a
 * block on a stream, the program frees it, and the next allocation is
 * judged by CUDA's rules. With the core's guards in place the oracle stays
 * silent; with a guard broken by a test-only switch (alloc/internal.h) it
 * reports exactly that early reuse, naming the allocating call and the
 * call that issued the work. */
#define _GNU_SOURCE
#include "core_testing.h"

#include <dlfcn.h>

static void sim_only(void) {
  SKIP_ON_CUDA("the simulated device's oracle");
  cr_redirect_stderr();
}
/* As a program synchronizes before it shuts cudalloc down: the shutdown
 * unmaps every page, which pending work must not touch. */
static void fini(void) {
  ca_sim_complete_all();
  core_fini();
}
TestSuite(sim_reuse_oracle, .init = sim_only, .fini = fini);

#define SIZE (3 * MiB)

/* The call sites the report must name: functions libc exports. */
static void *alloc_site(void) { return dlsym(RTLD_DEFAULT, "qsort"); }
static void *kernel_site(void) { return dlsym(RTLD_DEFAULT, "bsearch"); }

/* A kernel on s writes p. */
static void kernel_writes(ca_stream_t s, void *p) {
  cr_assert_eq(ca_sim_touch_at(s, p, SIZE, 1, kernel_site()), CUDA_SUCCESS);
}

static void *alloc_on(ca_stream_t s) {
  void *p = NULL;
  cr_assert_eq(ca_malloc(&p, SIZE, s, s ? CA_ALLOC_ASYNC : CA_ALLOC_SYNC, alloc_site()), CUDA_SUCCESS);
  return p;
}

static ca_stream_t new_stream(bool nonblocking) {
  ca_stream_t s = test_stream(nonblocking);
  ca_stream_created(s, nonblocking);
  return s;
}

/* How the report names a site: its symbol (a sanitizer may interpose its
 * own, e.g. __interceptor_qsort) at offset 0. */
static const char *site_label(void *site, char *buf, size_t cap) {
  Dl_info info;
  cr_assert(dladdr(site, &info) && info.dli_sname, "no symbol for %p", site);
  snprintf(buf, cap, "at %s+0", info.dli_sname);
  return buf;
}

/* Exactly one violation, for p, naming both sites; then forgotten so that
 * the suite's fini still checks the rest of the test. */
static void expect_one_violation_for(void *p) {
  char range[64];
  snprintf(range, sizeof range, "[%p, +%llu)", p, (unsigned long long)SIZE);
  const char *r = ca_sim_oracle_report(0);
  cr_assert_eq(ca_sim_oracle_violations(), 1, "%llu violations; the first: %s",
               (unsigned long long)ca_sim_oracle_violations(), r);
  cr_assert_not_null(strstr(r, range), "not about %s: %s", range, r);
  char a[128], k[128];
  cr_assert_not_null(strstr(r, site_label(alloc_site(), a, sizeof a)), "the allocating site is missing: %s", r);
  cr_assert_not_null(strstr(r, site_label(kernel_site(), k, sizeof k)), "the kernel's site is missing: %s", r);
  cr_assert_lt(strstr(r, a), strstr(r, k), "the sites are swapped: %s", r);
  cr_assert_not_null(strstr(captured_stderr(), "reuse oracle:"), "the violation was not printed");
  ca_sim_oracle_reset();
}

// ----------------------------------------------------------------------------
// A stream-ordered free: only its stream may reuse the block at once
// ----------------------------------------------------------------------------

/* A kernel on A writes p; p is freed on A; B asks for the same size. */
static void *reuse_across_streams(bool break_guard) {
  core_start("sim_events:manual");
  ca_debug.reuse_pending_anywhere = break_guard;
  ca_stream_t a = new_stream(true), b = new_stream(true);
  void *p = alloc_on(a);
  kernel_writes(a, p);
  cr_assert_eq(ca_free(p, a), CUDA_SUCCESS);
  void *q = alloc_on(b);
  CHECK_CONSISTENT();
  return q == p ? p : NULL;
}

Test(sim_reuse_oracle, another_stream_does_not_get_a_block_in_use) {
  cr_assert_null(reuse_across_streams(false));
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(sim_reuse_oracle, a_planted_cross_stream_reuse_is_caught) {
  void *p = reuse_across_streams(true);
  cr_assert_not_null(p, "the switch did not plant the reuse");
  expect_one_violation_for(p);
}

Test(sim_reuse_oracle, the_freeing_stream_may_reuse_at_once) {
  core_start("sim_events:manual");
  ca_stream_t a = new_stream(true);
  void *p = alloc_on(a);
  TOUCH(a, p, SIZE, true); /* the core suites' helper: the site is this test */
  cr_assert_eq(ca_free(p, a), CUDA_SUCCESS);
  cr_assert_eq(alloc_on(a), p, "work on A is ordered after the kernel: A reuses p");
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  cr_assert_eq(ca_sim_pending_touches(), 1, "the kernel is still running");
}

// ----------------------------------------------------------------------------
// cudaFree: no stream may reuse the block before earlier work is done
// ----------------------------------------------------------------------------

/* A kernel on a registered non-blocking stream writes p; cudaFree(p); then
 * cudaMalloc (any stream may use what it returns) of the same size. */
static void *reuse_after_free_sync(bool skip_fences) {
  core_start("sim_events:manual");
  ca_debug.skip_fences = skip_fences;
  ca_stream_t s = new_stream(true);
  void *p = alloc_on(NULL);
  kernel_writes(s, p);
  cr_assert_eq(ca_free_sync(p), CUDA_SUCCESS);
  void *q = alloc_on(NULL);
  CHECK_CONSISTENT();
  return q == p ? p : NULL;
}

Test(sim_reuse_oracle, cudamalloc_does_not_get_a_block_in_use) {
  cr_assert_null(reuse_after_free_sync(false));
  cr_assert_eq(ca_sim_oracle_violations(), 0);
}

Test(sim_reuse_oracle, a_planted_reuse_past_an_unfinished_fence_is_caught) {
  void *p = reuse_after_free_sync(true);
  cr_assert_not_null(p, "the switch did not plant the reuse");
  expect_one_violation_for(p);
}

/* Once the kernel's stream is synchronized, the block is free for all. */
Test(sim_reuse_oracle, completed_work_frees_the_block_for_everyone) {
  core_start("sim_events:manual");
  ca_stream_t s = new_stream(true);
  void *p = alloc_on(NULL);
  TOUCH(s, p, SIZE, true);
  cr_assert_eq(ca_free_sync(p), CUDA_SUCCESS);
  cr_assert_eq(ca_state.be->stream_sync(s), CUDA_SUCCESS);
  cr_assert_eq(ca_sim_pending_touches(), 0);
  void *q = alloc_on(NULL);
  (void)q; /* p or not: the core decides; the oracle only checks it is safe */
  cr_assert_eq(ca_sim_oracle_violations(), 0);
  CHECK_CONSISTENT();
}
