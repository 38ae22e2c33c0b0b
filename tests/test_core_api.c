/* The public API on the simulated device: results, bad input, statistics,
 * and that the invariant checker notices a corrupted allocator. */
#include "core_testing.h"

#include <unistd.h>

TestSuite(core_api, .fini = core_fini);

Test(core_api, allocates_writable_memory_and_frees_it) {
  core_start(NULL);
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, 1000, 0), cudaSuccess);
  cr_assert_not_null(p);
  cr_assert_eq((uintptr_t)p % 512, 0, "blocks are 512-byte aligned");
  memset(p, 0xab, 1000);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.requested_bytes.current, 1000);
  cr_assert_eq(s.allocated_bytes.current, 1024);
  cr_assert_eq(s.num_live_blocks.current, 1);
  CHECK_CONSISTENT();
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  s = stats0();
  cr_assert_eq(s.allocated_bytes.current, 0);
  cr_assert_eq(s.num_frees.total, 1);
  CHECK_CONSISTENT();
}

/* num_allocs and num_frees never fall: the core keeps no peak for them
 * (fence.h's ca_stat_tick) and the snapshot sets it to the current, with
 * core allocations, front-cache hits and frees of both kinds mixed, and
 * across a reset of the peaks. */
Test(core_api, counts_that_never_fall_stand_at_their_peak) {
  core_start(NULL);
  void *p[6];
  for (int i = 0; i < 4; i++) cr_assert_eq(cudalloc_malloc(&p[i], 1000, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free(p[0], 0), cudaSuccess);   /* into the thread's front cache */
  cr_assert_eq(cudalloc_free(p[1], 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&p[4], 1000, 0), cudaSuccess);   /* hits */
  cr_assert_eq(cudalloc_malloc(&p[5], 1000, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p[2]), cudaSuccess);   /* the core's free */
  cudalloc_reset_peaks();
  cr_assert_eq(cudalloc_malloc(&p[0], 1000, 0), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_expect(s.num_allocs.current == 7 && s.num_allocs.peak == 7 && s.num_allocs.total == 7,
            "num_allocs %lld/%lld/%lld", (long long)s.num_allocs.current, (long long)s.num_allocs.peak,
            (long long)s.num_allocs.total);
  cr_expect(s.num_frees.current == 3 && s.num_frees.peak == 3 && s.num_frees.total == 3,
            "num_frees %lld/%lld/%lld", (long long)s.num_frees.current, (long long)s.num_frees.peak,
            (long long)s.num_frees.total);
  cr_expect_eq(s.num_live_blocks.current, 4);
  int keep[] = {0, 3, 4, 5};
  for (int i = 0; i < 4; i++) cr_assert_eq(cudalloc_free_sync(p[keep[i]]), cudaSuccess);
  CHECK_CONSISTENT();
}

Test(core_api, size_zero_succeeds_with_null_that_frees) {
  core_start(NULL);
  void *p = (void *)0x1;
  cr_assert_eq(cudalloc_malloc(&p, 0, 0), cudaSuccess);
  cr_assert_null(p, "size 0 gives NULL, as cudaMalloc does");
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(cudalloc_free(NULL, 0), cudaSuccess);
  CHECK_CONSISTENT();
}

Test(core_api, null_out_pointer_is_invalid_value) {
  core_start(NULL);
  cr_assert_eq(cudalloc_malloc(NULL, 64, 0), cudaErrorInvalidValue);
  CHECK_CONSISTENT();
}

Test(core_api, absurd_sizes_are_allocation_errors, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("its sizes assume the simulated capacity");
  core_start("sim_capacity_mb:64");
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, SIZE_MAX, 0), cudaErrorMemoryAllocation);
  cr_assert_eq(cudalloc_malloc(&p, SIZE_MAX / 2 + 1, 0), cudaErrorMemoryAllocation);
  cr_assert_eq(cudalloc_malloc(&p, 65 * MiB, 0), cudaErrorMemoryAllocation);
  cr_assert_eq(stats0().num_ooms.total, 3);
  cr_assert_eq(stats0().allocated_bytes.current, 0);
  CHECK_CONSISTENT();
  /* Still usable afterwards. */
  cr_assert_eq(cudalloc_malloc(&p, MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  const char *err = captured_stderr();
  cr_assert(strstr(err, "out of memory on device 0"), "an out-of-memory report was printed:\n%s", err);
}

Test(core_api, foreign_pointer_is_rejected_and_changes_nothing) {
  core_start(NULL);
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 4096, 0), cudaSuccess);
  int on_stack;
  cr_assert_eq(cudalloc_free_sync(&on_stack), cudaErrorInvalidValue);
  cr_assert_eq(cudalloc_free(&on_stack, 0), cudaErrorInvalidValue);
  cr_assert_eq(ca_free_sync(&on_stack), CUDA_ERROR_NOT_FOUND, "the shim passes such pointers to the real free");
  cr_assert_not(cudalloc_owns(&on_stack));
  cr_assert(cudalloc_owns(p));
  cr_assert_eq(stats0().num_live_blocks.current, 1);
  CHECK_CONSISTENT();
}

/* The owner's range test is one compare (alloc/device.c: below the base
 * wraps around past the size): the reservation's first and last bytes are
 * the device's, the bytes just outside it and a low address are not.
 * (With ">" for ">=" in both of its tests, "just past it" fails.) */
Test(core_api, the_reservations_edges_decide_the_owner) {
  SKIP_ON_CUDA("reads the simulated device's reservation");
  core_start(NULL);
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 4096, 0), cudaSuccess);
  ca_device_t *d = dev0();
  cr_assert(ca_config.expandable_segments && d->va_size, "the default is one expandable reservation");
  cr_assert(ca_owns((void *)d->va_base) && ca_owns((void *)(d->va_base + d->va_size - 1)));
  cr_assert_not(ca_owns((void *)(d->va_base - 1)), "just below the reservation");
  cr_assert_not(ca_owns((void *)(d->va_base + d->va_size)), "just past it");
  cr_assert_not(ca_owns((void *)(uintptr_t)4096), "a low address");
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
}

Test(core_api, double_free_is_reported_once_and_corrupts_nothing, .init = cr_redirect_stderr) {
  core_start(NULL);
  void *p, *q;
  cr_assert_eq(cudalloc_malloc(&p, 4096, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&q, 4096, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p), cudaErrorInvalidValue);
  cr_assert_eq(stats0().num_bad_frees.total, 1);
  cr_assert_eq(stats0().num_live_blocks.current, 1);
  CHECK_CONSISTENT();
  const char *err = captured_stderr();
  cr_assert_eq(count_of(err, "double free"), 1, "one line names the double free:\n%s", err);
}

Test(core_api, interior_pointer_free_is_rejected, .init = cr_redirect_stderr) {
  core_start(NULL);
  char *p;
  cr_assert_eq(cudalloc_malloc((void **)&p, 8192, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(p + 512), cudaErrorInvalidValue);
  cr_assert_eq(stats0().num_live_blocks.current, 1, "the block is still live");
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  CHECK_CONSISTENT();
}

Test(core_api, address_range_reports_the_block_asked_for) {
  core_start(NULL);
  char *p;
  cr_assert_eq(cudalloc_malloc((void **)&p, 10000, 0), cudaSuccess);
  void *base = NULL;
  size_t size = 0;
  cr_assert_eq(cudalloc_get_address_range(p + 777, &base, &size), cudaSuccess);
  cr_assert_eq(base, p);
  cr_assert_eq(size, 10000);
  cr_assert_eq(cudalloc_get_address_range(p, &base, &size), cudaSuccess);
  cr_assert_eq(base, p);
  cudalloc_free_sync(p);
  cr_assert_eq(cudalloc_get_address_range(p, &base, &size), cudaErrorInvalidValue, "a freed block has no range");
}

Test(core_api, empty_cache_gives_every_free_page_back) {
  core_start(NULL);
  void *p[8];
  for (int i = 0; i < 8; i++) cr_assert_eq(cudalloc_malloc(&p[i], 3 * MiB, 0), cudaSuccess);
  for (int i = 0; i < 8; i++) cudalloc_free_sync(p[i]);
  cr_assert_gt(stats0().reserved_bytes.current, 0);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);
  cr_assert_eq(stats0().reserved_bytes.current, 0);
  if (!test_on_cuda()) cr_assert_eq(ca_sim_physical_used(0), 0, "the simulated device holds no page");
  CHECK_CONSISTENT();
}

Test(core_api, mem_get_info_counts_the_cache_as_free) {
  SKIP_ON_CUDA("its sizes assume the simulated capacity");
  core_start("sim_capacity_mb:256");
  size_t free0, total;
  cr_assert_eq(ca_mem_get_info(0, &free0, &total), CUDA_SUCCESS);
  cr_assert_eq(total, 256 * MiB);
  cr_assert_eq(free0, total);
  void *p;
  cr_assert_eq(cudalloc_malloc(&p, 64 * MiB, 0), cudaSuccess);
  size_t free1;
  ca_mem_get_info(0, &free1, &total);
  cr_assert_eq(free1, total - 64 * MiB);
  cudalloc_free_sync(p);
  size_t free2;
  ca_mem_get_info(0, &free2, &total);
  cr_assert_eq(free2, total, "freed memory is cached but reported free");
  cr_assert_gt(stats0().reserved_bytes.current, 0, "and it is still cached");
}

Test(core_api, stats_peaks_and_reset) {
  core_start(NULL);
  void *a, *b;
  cudalloc_malloc(&a, 4 * MiB, 0);
  cudalloc_malloc(&b, 4 * MiB, 0);
  cudalloc_free_sync(b);
  cudalloc_stats_t s = stats0();
  cr_assert_eq(s.allocated_bytes.peak, 8 * MiB);
  cr_assert_eq(s.allocated_bytes.current, 4 * MiB);
  cr_assert_eq(s.allocated_bytes.total, 8 * MiB);
  cr_assert_geq(s.reserved_bytes.peak, 8 * MiB);
  cudalloc_reset_peaks();
  cr_assert_eq(stats0().allocated_bytes.peak, 4 * MiB);
  cudalloc_free_sync(a);
}

Test(core_api, print_stats_writes_a_table) {
  core_start(NULL);
  void *a;
  cudalloc_malloc(&a, 4 * MiB, 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cudalloc_print_stats(f);
  fclose(f);
  cr_assert(strstr(buf, "allocated_bytes") && strstr(buf, "4.00 MiB"), "table:\n%s", buf);
  free(buf);
  cudalloc_free_sync(a);
}

Test(core_api, report_lists_leaks_by_call_site) {
  core_start(NULL);
  void *a, *b;
  cudalloc_malloc(&a, 3000, 0);
  cudalloc_malloc(&b, 5000, 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cudalloc_report(f);
  fclose(f);
  cr_assert(strstr(buf, "LEAK SUMMARY: 8000 bytes leaked in 2 allocations"), "report:\n%s", buf);
  cr_assert_eq(count_of(buf, "Saved host backtrace"), 2, "two call sites, each with its frames:\n%s", buf);
  cr_assert_geq(count_of(buf, "Host Frame: "), 4, "the test's frame and its callers':\n%s", buf);
  cr_assert_null(strstr(buf, "not recorded"), "every block knows its call site:\n%s", buf);
  free(buf);
}

/* The header's promise: live blocks are reported as leaks, not freed.
 * Before the fix, cudalloc_shutdown() printed nothing. */
Test(core_api, shutdown_reports_live_blocks_as_leaks) {
  core_start(NULL);
  void *a, *b, *c;
  cr_assert_eq(cudalloc_malloc(&a, 3000, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 5000, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&c, 7000, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(b), cudaSuccess);
  capture_t cap;
  char err[8192];
  capture_begin(&cap);
  cudalloc_shutdown();
  capture_end(&cap, err, sizeof err);
  cr_assert_not_null(strstr(err, "cudalloc: cudalloc_shutdown: 2 live blocks, reported as leaks (not freed)\n"), "%s", err);
  cr_assert_not_null(strstr(err, "LEAK SUMMARY: 10000 bytes leaked in 2 allocations\n"), "%s", err);
  cr_assert_not(ca_ready(), "and the allocator is stopped");
}

Test(core_api, shutdown_without_live_blocks_or_with_quiet_says_nothing) {
  const char *confs[] = {NULL, "quiet:true"};
  for (int i = 0; i < 2; i++) {
    core_start(confs[i]);
    void *a;
    cr_assert_eq(cudalloc_malloc(&a, 3000, 0), cudaSuccess);
    if (!confs[i]) cr_assert_eq(cudalloc_free_sync(a), cudaSuccess);
    capture_t cap;
    char err[4096];
    capture_begin(&cap);
    cudalloc_shutdown();
    capture_end(&cap, err, sizeof err);
    cr_assert_str_empty(err, "with %s: %s", confs[i] ? confs[i] : "a block freed", err);
  }
}

/* A program that stops cudalloc before exit still gets its report files,
 * with the leak in them. */
Test(core_api, shutdown_writes_the_report_files) {
  char dir[] = "/tmp/cudalloc-shutdown-XXXXXX", conf[128], path[192], text[4096];
  cr_assert_not_null(mkdtemp(dir));
  snprintf(conf, sizeof conf, "quiet:true,report:%s/r", dir);
  core_start(conf);
  void *a;
  cr_assert_eq(cudalloc_malloc(&a, 3000, 0), cudaSuccess);
  cudalloc_shutdown();
  snprintf(path, sizeof path, "%s/r-leaks.txt", dir);
  FILE *f = fopen(path, "r");
  cr_assert_not_null(f, "no %s", path);
  text[fread(text, 1, sizeof text - 1, f)] = 0;
  fclose(f);
  cr_assert_not_null(strstr(text, "LEAK SUMMARY: 3000 bytes leaked in 1 allocations\n"), "%s", text);
  snprintf(path, sizeof path, "%s/r-stats.json", dir);
  cr_assert_eq(access(path, R_OK), 0, "no %s", path);
  snprintf(path, sizeof path, "rm -rf '%s'", dir);
  cr_assert_eq(system(path), 0);
}

Test(core_api, init_without_a_driver_fails_cleanly, .init = cr_redirect_stderr) {
  if (test_on_cuda()) cr_skip_test("a driver is present");
  cr_assert_neq(cudalloc_init("backend:cuda"), cudaSuccess);
  void *p = (void *)1;
  cr_assert_neq(cudalloc_malloc(&p, 64, 0), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync((void *)0x1000), cudaErrorInvalidValue);
}

/* The checker must be able to fail: corrupt the state behind its back. */
Test(core_api, checker_catches_wrong_stats, .init = cr_redirect_stderr) {
  core_start(NULL);
  void *p;
  cudalloc_malloc(&p, 4096, 0);
  CHECK_CONSISTENT();
  dev0()->stats.allocated_bytes.current += 512;
  cr_assert_neq(cudalloc_check(), 0);
  dev0()->stats.allocated_bytes.current -= 512;
  CHECK_CONSISTENT();
}

Test(core_api, checker_catches_broken_tiling, .init = cr_redirect_stderr) {
  core_start(NULL);
  void *p;
  cudalloc_malloc(&p, 4096, 0);
  ca_block_t *b = ca_ptrmap_get(&dev0()->live, (uintptr_t)p);
  b->size += 512;
  cr_assert_neq(cudalloc_check(), 0);
  b->size -= 512;
  CHECK_CONSISTENT();
}

Test(core_api, checker_catches_a_live_block_on_an_unmapped_page, .init = cr_redirect_stderr) {
  core_start(NULL);
  void *p;
  cudalloc_malloc(&p, 4 * MiB, 0);
  ca_block_t *b = ca_ptrmap_get(&dev0()->live, (uintptr_t)p);
  ca_segment_t *seg = b->seg;
  size_t page = (b->addr - seg->base) / dev0()->page;
  seg->mapped[page / 64] &= ~(1ull << (page % 64));
  cr_assert_neq(cudalloc_check(), 0);
  seg->mapped[page / 64] |= 1ull << (page % 64);
  CHECK_CONSISTENT();
}

static char *leak_report(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  cudalloc_report(f);
  fclose(f);
  return buf;
}

/* Two call sites, one of them called twice: with backtraces the report
 * groups the two identical stacks and prints every frame. */
static __attribute__((noinline)) void *alloc_here(size_t size) {
  void *p = NULL;
  cr_assert_eq(cudalloc_malloc(&p, size, 0), cudaSuccess);
  return p;
}

static void stacks_are_kept_once(const char *conf) {
  core_start(conf);
  for (volatile int i = 0; i < 2; i++) alloc_here(1000);   /* one call instruction, twice */
  void *other;
  cudalloc_malloc(&other, 3000, 0);
  char *buf = leak_report();
  cr_assert(strstr(buf, "Leaked 2000 bytes in 2 allocations"), "identical stacks group:\n%s", buf);
  cr_assert(strstr(buf, "Leaked 3000 bytes at 0x"), "one allocation: compute-sanitizer's line:\n%s", buf);
  cr_assert_gt(count_of(buf, "Host Frame: "), 2, "more than one frame per call site:\n%s", buf);
  cr_assert_leq(count_of(buf, "Saved host backtrace"), 2, "%s", buf);
  cr_assert_leq(count_of(buf, "Host Frame: ") - count_of(buf, "(inlined)"), 16, "at most track_depth frames each:\n%s",
                buf);
  free(buf);
}

Test(core_api, backtraces_are_kept_once_per_stack) { stacks_are_kept_once("track:backtrace,track_depth:8"); }

Test(core_api, cached_stacks_are_kept_once_per_stack) { stacks_are_kept_once("track:stack,track_depth:8"); }

Test(core_api, tracking_off_records_no_call_site) {
  core_start("track:off");
  void *p;
  cudalloc_malloc(&p, 1000, 0);
  char *buf = leak_report();
  cr_assert(strstr(buf, "call site not recorded"), "%s", buf);
  cr_assert(strstr(buf, "LEAK SUMMARY: 1000 bytes leaked in 1 allocations"), "%s", buf);
  free(buf);
}
