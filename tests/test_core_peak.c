/* The peak report (alloc/peak.c): what was live at the moment of peak
 * allocated memory (and at peak reserved), by call site, biggest first,
 * and in which step; a peak that is later exceeded gives way to the new
 * one; the amortized copy stays within its stated precision; and
 * cudalloc_check() catches per-site totals that drift from the stats. */
#include "core_testing.h"

static void setup(void) { core_start("sim_capacity_mb:64,track:caller"); }   /* made-up sites: the caller is the site */
TestSuite(core_peak, .init = setup, .fini = core_fini);

/* Call sites made up for the test: with track:caller a site is the
 * caller's address, which the core never dereferences. */
#define SITE(i) ((void *)(uintptr_t)(0x10000 + 64 * (i)))
#define SITE_A SITE(1)
#define SITE_B SITE(2)
#define SITE_C SITE(3)

static void *alloc_at(void *site, size_t n) {
  void *p = NULL;
  cr_assert_eq(ca_malloc(&p, n, NULL, CA_ALLOC_SYNC, site), CUDA_SUCCESS, "allocation of %zu bytes", n);
  return p;
}

static void release(void *p) { cr_assert_eq(ca_free_sync(p), CUDA_SUCCESS); }

/* The peak of kind k, copied out of the lock (sites into out). */
static ca_peak_t peak_of(ca_peak_kind_t k, ca_site_live_t *out, size_t cap) {
  ca_device_t *d = dev0();
  ca_peak_t p;
  ca_devlock_take(&d->lock);
  bool any = ca_peak_get(d, k, &p);
  size_t n = p.nsites < cap ? p.nsites : cap;
  if (any) memcpy(out, p.sites, n * sizeof *out);
  ca_devlock_release(&d->lock);
  cr_assert(any, "no peak recorded");
  p.sites = out;
  return p;
}

static int64_t sum_of(const ca_peak_t *p) {
  int64_t s = 0;
  for (size_t i = 0; i < p->nsites; i++) s += p->sites[i].bytes;
  return s;
}

Test(core_peak, the_peak_holds_its_sites_and_gives_way_to_a_higher_one) {
  ca_site_live_t s[16];
  void *a[4];
  for (int i = 0; i < 3; i++) a[i] = alloc_at(SITE_A, MiB);
  void *b = alloc_at(SITE_B, 2 * MiB);
  ca_peak_t p = peak_of(CA_PEAK_ALLOCATED, s, 16);   /* at the peak now: exact */
  cr_assert_eq(p.peak, 5 * MiB);
  cr_assert_eq(p.taken_at, p.peak);
  cr_assert_eq(p.step, 0);
  cr_assert_eq(p.nsites, 2);
  cr_expect(s[0].site == SITE_A && s[0].bytes == 3 * MiB && s[0].count == 3, "biggest first: site A, 3 MiB in 3");
  cr_expect(s[1].site == SITE_B && s[1].bytes == 2 * MiB && s[1].count == 1);
  cudalloc_step();   /* step 1: A's blocks go, C's come, above the old peak */
  for (int i = 0; i < 3; i++) release(a[i]);
  void *c = alloc_at(SITE_C, 4 * MiB);
  release(c);        /* the peak is left here: copied before the free */
  a[3] = alloc_at(SITE_A, MiB);
  p = peak_of(CA_PEAK_ALLOCATED, s, 16);
  cr_assert_eq(p.peak, 6 * MiB);
  cr_assert_eq(p.taken_at, 6 * MiB);
  cr_assert_eq(p.step, 1);
  cr_assert_eq(p.nsites, 2, "site A held nothing at the new peak");
  cr_expect(s[0].site == SITE_C && s[0].bytes == 4 * MiB && s[0].count == 1);
  cr_expect(s[1].site == SITE_B && s[1].bytes == 2 * MiB);
  cr_expect_eq(sum_of(&p), p.live, "the sites add up to what was live");
  release(a[3]);
  release(b);
}

/* What was live when reserved memory peaked: the sites add up to the
 * allocated bytes of that moment, and the peak is the statistic's. */
Test(core_peak, the_reserved_peak_names_what_was_live_then) {
  ca_site_live_t s[16];
  void *a = alloc_at(SITE_A, 6 * MiB), *b = alloc_at(SITE_B, 3 * MiB);
  ca_peak_t p = peak_of(CA_PEAK_RESERVED, s, 16);
  cr_assert_eq(p.peak, stats0().reserved_bytes.peak);
  cr_assert_eq(p.taken_at, p.peak);
  cr_assert_eq(p.live, 9 * MiB);
  cr_assert_eq(p.nsites, 2);
  cr_expect(s[0].site == SITE_A && s[0].bytes == 6 * MiB);
  cr_expect_eq(sum_of(&p), p.live);
  release(a);
  release(b);
}

/* The step is the one the peak was reached in, even when the free that
 * leaves it comes after the step mark. */
Test(core_peak, the_step_is_where_the_peak_was_reached) {
  ca_site_live_t s[4];
  void *a = alloc_at(SITE_A, 2 * MiB);
  cudalloc_step();
  cudalloc_step();
  release(a);
  ca_peak_t p = peak_of(CA_PEAK_ALLOCATED, s, 4);
  cr_assert_eq(p.step, 0);
  cr_assert_eq(p.peak, 2 * MiB);
}

enum { SITES = 64, ROUNDS = 200 };

/* 64 KiB live at each of SITES sites, then ROUNDS blocks, each freed at
 * once and 512 bytes bigger than the one before. */
static void creep_up(void *base[SITES]) {
  for (int i = 0; i < SITES; i++) base[i] = alloc_at(SITE(10 + i), 64 * 1024);
  for (int k = 1; k <= ROUNDS; k++) release(alloc_at(SITE(10), (size_t)512 * k));
}

/* The amortized copy: a peak that creeps up by 512 bytes between frees,
 * with 64 sites live, is copied about once in 64 frees, never further than
 * 1/64 below the peak; the report says where it was taken; once the
 * program is at a peak when the report is asked for, it is exact again. */
Test(core_peak, the_amortized_copy_stays_within_its_precision) {
  ca_site_live_t s[SITES + 2];
  void *base[SITES];
  creep_up(base);
  ca_peak_t p = peak_of(CA_PEAK_ALLOCATED, s, SITES + 2);
  cr_assert_eq(p.peak, SITES * 64 * 1024 + 512 * ROUNDS);
  cr_expect_lt(p.taken_at, p.peak, "every free copied: the copy is not amortized");
  cr_expect_geq(p.taken_at, p.peak - p.peak / 64, "copied at %lld, peak %lld", (long long)p.taken_at,
                (long long)p.peak);
  cr_expect_eq(sum_of(&p), p.taken_at);
  char out[8192];
  FILE *f = fmemopen(out, sizeof out, "w");
  ca_peak_report(f, 2);
  fclose(f);
  cr_expect(strstr(out, "(composition copied at "), "the report must say the copy is not at the peak:\n%s", out);
  void *top = alloc_at(SITE(9), MiB);   /* a new peak, and the report asked for while at it */
  p = peak_of(CA_PEAK_ALLOCATED, s, SITES + 2);
  cr_expect_eq(p.taken_at, p.peak);
  release(top);
  for (int i = 0; i < SITES; i++) release(base[i]);
}

/* The amortization's count, exactly: with the 64 sites of the test above
 * and a peak that creeps by 512 bytes (far below 1/64) at each free, the
 * first free copies, and then every 64th free after a copy (the count of
 * frees since the copy, peak_since in types.h, reaching the sites): the
 * copies are at rounds 1, 65, 129 and 193. */
Test(core_peak, the_amortized_copy_is_retaken_after_as_many_frees_as_sites) {
  ca_site_live_t s[SITES + 2];
  void *base[SITES];
  creep_up(base);
  ca_peak_t p = peak_of(CA_PEAK_ALLOCATED, s, SITES + 2);
  cr_expect_eq(p.taken_at, SITES * 64 * 1024 + 512 * 193, "copied at %lld", (long long)p.taken_at);
  for (int i = 0; i < SITES; i++) release(base[i]);
}

/* The report's lines, as docs/reports.md shows them. */
Test(core_peak, the_report_lists_sites_biggest_first_with_their_share) {
  void *a = alloc_at(SITE_A, MiB), *b = alloc_at(SITE_B, 3 * MiB);
  char out[8192];
  FILE *f = fmemopen(out, sizeof out, "w");
  ca_peak_report(f, 0);
  fclose(f);
  cr_log_info("%s", out);
  const char *head = strstr(out, "cudalloc: peak allocated on device 0: 4194304 bytes (4.00 MiB) in step 0, held by 2 call sites:");
  cr_assert(head, "%s", out);
  const char *first = strstr(head, "3145728 bytes (75.0%) in 1 block from "), *second = strstr(head, "1048576 bytes (25.0%)");
  cr_expect(first && second && first < second, "biggest first:\n%s", out);
  cr_expect(strstr(out, "cudalloc: peak reserved on device 0: "), "%s", out);
  release(a);
  release(b);
}

/* cudalloc_reset_peaks starts the peaks over: a lower one is reported. */
Test(core_peak, reset_peaks_starts_the_composition_over) {
  ca_site_live_t s[4];
  release(alloc_at(SITE_A, 8 * MiB));
  cudalloc_reset_peaks();
  void *b = alloc_at(SITE_B, MiB);
  release(b);
  ca_peak_t p = peak_of(CA_PEAK_ALLOCATED, s, 4);
  cr_assert_eq(p.peak, MiB);
  cr_assert_eq(p.nsites, 1);
  cr_expect(s[0].site == SITE_B);
}

/* The per-site totals must add up to allocated_bytes: cudalloc_check()
 * says so, and catches a table that misses frees (the broken switch). */
Test(core_peak, check_catches_site_totals_that_drift) {
  release(alloc_at(SITE_A, MiB));
  cr_assert_eq(cudalloc_check(), 0);
  ca_debug.sites_miss_frees = true;
  release(alloc_at(SITE_A, MiB));
  ca_debug.sites_miss_frees = false;
  char err[1024];
  capture_t c;
  capture_begin(&c);
  int rc = cudalloc_check();
  capture_end(&c, err, sizeof err);
  cr_assert_eq(rc, CA_CHECK_STATS, "the drift went unnoticed");
  cr_expect(strstr(err, "call sites hold 1048576 live bytes, stats say 0"), "%s", err);
}
