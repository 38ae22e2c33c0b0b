/* Memory policy: fragmentation (expandable against classic segments),
 * steady state without backend calls, caps, garbage collection, the small
 * pool, max_split_size, rounding and several devices. */
#include "core_testing.h"

TestSuite(core_memory, .fini = core_fini);

/* Fills the device with 2 MiB blocks, frees every other one, asks for a
 * block larger than any hole. Returns the final allocation's result. */
static cudaError_t fragment_then_ask_big(void **live, int *nlive) {
  void *blocks[64];
  int n = 0;
  capture_t cap;
  char err[4096];
  capture_begin(&cap);   /* the fill ends in one out-of-memory diagnosis */
  while (n < 64 && cudalloc_malloc(&blocks[n], 2 * MiB, 0) == cudaSuccess) n++;
  capture_end(&cap, err, sizeof err);
  cr_assert_geq(n, 20, "the device holds at least 20 blocks of 2 MiB");
  cr_assert_eq(count_of(err, "cudalloc: out of memory on device 0"), 1, "%s", err);
  /* Expandable: every page is live. Classic: 4 MiB are left on the device,
   * but a block of this size needs a 20 MiB segment. */
  cr_assert_not_null(strstr(err, ca_config.expandable_segments ? "(2.0 MiB): exhausted\n" : "(2.0 MiB): fragmented\n"),
                     "%s", err);
  *nlive = 0;
  for (int i = 0; i < n; i++) {
    if (i % 2) live[(*nlive)++] = blocks[i];
    else cudalloc_free_sync(blocks[i]);
  }
  CHECK_CONSISTENT();
  void *big;
  cudaError_t rc = cudalloc_malloc(&big, 20 * MiB, 0);
  if (rc == cudaSuccess) live[(*nlive)++] = big;
  CHECK_CONSISTENT();
  return rc;
}

Test(core_memory, classic_segments_fail_on_fragmentation, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("its sizes assume the simulated capacity");
  core_start("sim_capacity_mb:64,expandable_segments:false");
  void *live[64];
  int n;
  cr_assert_eq(fragment_then_ask_big(live, &n), cudaErrorMemoryAllocation,
               "half the memory is free, but in 2 MiB holes: a classic cache cannot serve 20 MiB");
}

Test(core_memory, expandable_segments_move_pages_out_of_holes) {
  SKIP_ON_CUDA("its sizes assume the simulated capacity");
  core_start("sim_capacity_mb:64");
  void *live[64];
  int n;
  cr_assert_eq(fragment_then_ask_big(live, &n), cudaSuccess);
  cudalloc_stats_t s = stats0();
  cr_assert_gt(s.num_page_moves.total, 0, "pages were moved from the holes");
  /* Reserved stays within one page per live block of the live total. */
  int64_t slack = (int64_t)n * (int64_t)dev0()->page;
  cr_assert_leq(s.reserved_bytes.current, s.allocated_bytes.current + slack,
                "reserved %lld, allocated %lld, %d live blocks", (long long)s.reserved_bytes.current,
                (long long)s.allocated_bytes.current, n);
  for (int i = 0; i < n; i++) memset(live[i], i, 2 * MiB);   /* all of it is really mapped */
}

/* One training-like step: variable sizes, fixed by the step number. */
/* A step of a training loop: activations of varying sizes, all freed by
 * its end. With cudaFree, the loop ends the step as C training loops do:
 * cudalloc_step() seals the step's frees, and a host synchronization (the
 * loss read back) lets the device catch up, so the next step finds them
 * complete. Without it, on a device that runs behind the host (the test
 * suite's lagging events), the frees are still pending when the next step
 * allocates, and growing is then the policy (docs/design.md). */
static void step(int k, ca_stream_t s, bool sync_free) {
  void *act[24];
  uint64_t rng = 1234 + (uint64_t)k;
  for (int i = 0; i < 24; i++) {
    size_t size = 4096 + rng_next(&rng) % (6 * MiB);
    cr_assert_eq(cudalloc_malloc(&act[i], size, (cudaStream_t)s), cudaSuccess);
  }
  for (int i = 23; i >= 0; i--) {
    if (sync_free) cudalloc_free_sync(act[i]);
    else cudalloc_free(act[i], (cudaStream_t)s);
  }
  if (sync_free) {
    cudalloc_step();
    cr_assert_eq(ca_state.be->device_sync(0), CUDA_SUCCESS);
  }
}

static void steady_state(bool sync_free) {
  core_start("sim_capacity_mb:512");
  void *weights;
  cudalloc_malloc(&weights, 40 * MiB, 0);
  for (int k = 0; k < 3; k++) step(0, NULL, sync_free);   /* warm-up: the same step */
  cudalloc_stats_t before = stats0();
  for (int k = 0; k < 20; k++) step(0, NULL, sync_free);
  cudalloc_stats_t after = stats0();
  cr_assert_eq(memory_calls(&after), memory_calls(&before), "repeating a step maps, creates or unmaps nothing");
  cr_assert_eq(after.reserved_bytes.peak, before.reserved_bytes.peak);
  if (!sync_free)
    cr_assert_eq(after.backend_event_record.total, before.backend_event_record.total,
                 "stream-ordered frees reused on their stream need no event at all");
  CHECK_CONSISTENT();
}

/* A growth that moves pages out of free blocks looks only at blocks of a
 * page or more: a smaller one holds no whole page. At 64 streams the walk
 * over every free block cost 21 instructions a GPU-like pair
 * (docs/benchmarks.md, twentieth session). Inputs: 200 free blocks of
 * 512 bytes in the small pool and one of 8 MiB in the large pool, and a
 * steal that wants more than all of them hold, so that it walks them all. */
Test(core_memory, a_page_steal_looks_at_no_block_smaller_than_a_page) {
  SKIP_ON_CUDA("it counts the simulated device's free blocks");
  core_start("sim_capacity_mb:64,sim_events:auto");
  void *small[400], *big;
  for (int i = 0; i < 400; i++) cr_assert_eq(cudalloc_malloc(&small[i], 512, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&big, 8 * MiB, 0), cudaSuccess);
  for (int i = 0; i < 400; i += 2) cr_assert_eq(cudalloc_free_sync(small[i]), cudaSuccess);   /* apart: no merge */
  cr_assert_eq(cudalloc_free_sync(big), cudaSuccess);
  seal_and_poll();
  CHECK_CONSISTENT();
  ca_device_t *d = dev0();
  uint64_t before = ca_debug.steal_looks;
  ca_devlock_take(&d->lock);
  size_t got = ca_steal_pages(d, 64 * MiB);
  ca_devlock_release(&d->lock);
  uint64_t looks = ca_debug.steal_looks - before;
  cr_assert_eq(got, 8 * MiB, "the big block's four pages were taken, %zu bytes", got);
  cr_assert_eq(looks, 1, "%llu free blocks looked at: only the big one holds a whole page", (unsigned long long)looks);
  CHECK_CONSISTENT();
  for (int i = 1; i < 400; i += 2) cr_assert_eq(cudalloc_free_sync(small[i]), cudaSuccess);
}

Test(core_memory, steady_state_makes_no_backend_calls_with_stream_frees) { steady_state(false); }
Test(core_memory, steady_state_makes_no_memory_calls_with_cudafree) { steady_state(true); }

Test(core_memory, variable_steps_keep_reserved_close_to_the_peak) {
  core_start("sim_capacity_mb:512");
  for (int k = 0; k < 50; k++) step(k, NULL, true);
  cudalloc_stats_t s = stats0();
  double ratio = (double)s.reserved_bytes.peak / (double)s.allocated_bytes.peak;
  cr_assert_leq(ratio, 1.10, "reserved/allocated at peak = %.3f over 50 variable steps", ratio);
}

Test(core_memory, memory_cap_is_a_clean_out_of_memory, .init = cr_redirect_stderr) {
  core_start("sim_capacity_mb:256,memory_cap_mb:32");
  void *a, *b;
  cr_assert_eq(cudalloc_malloc(&a, 24 * MiB, 0), cudaSuccess);
  cr_assert_eq(cudalloc_malloc(&b, 16 * MiB, 0), cudaErrorMemoryAllocation, "the cap is 32 MiB");
  cr_assert_leq(stats0().reserved_bytes.peak, 32 * MiB);
  cudalloc_free_sync(a);
  cr_assert_eq(cudalloc_malloc(&b, 30 * MiB, 0), cudaSuccess, "freed memory is usable again under the cap");
  CHECK_CONSISTENT();
}

Test(core_memory, memory_fraction_caps_too, .init = cr_redirect_stderr) {
  SKIP_ON_CUDA("its sizes assume the simulated capacity");
  core_start("sim_capacity_mb:256,memory_fraction:0.25");
  void *a;
  cr_assert_eq(cudalloc_malloc(&a, 65 * MiB, 0), cudaErrorMemoryAllocation);
  cr_assert_eq(cudalloc_malloc(&a, 60 * MiB, 0), cudaSuccess);
}

Test(core_memory, garbage_collection_gives_cache_back_above_the_threshold) {
  /* legacy_queue:off: the frees come back through a fence into the pool,
   * which garbage collection trims (the legacy queue's blocks stay pending) */
  core_start("sim_capacity_mb:256,memory_cap_mb:100,garbage_collection_threshold:0.5,legacy_queue:off");
  void *a[4];
  for (int i = 0; i < 4; i++) cudalloc_malloc(&a[i], 20 * MiB, 0);   /* 80 MiB reserved */
  for (int i = 0; i < 4; i++) cudalloc_free_sync(a[i]);
  void *b, *c;
  cudalloc_malloc(&b, 30 * MiB, 0);   /* reuses cached memory, no growth */
  cudalloc_malloc(&c, 60 * MiB, 0);   /* must grow: above 50 MiB reserved, cache goes back first */
  cudalloc_stats_t s = stats0();
  cr_assert_gt(s.backend_release.total, 0, "cached pages were released");
  cr_assert_leq(s.reserved_bytes.current, 100 * MiB);
  CHECK_CONSISTENT();
}

Test(core_memory, small_requests_share_pages) {
  core_start(NULL);
  void *p[1000];
  for (int i = 0; i < 1000; i++) cr_assert_eq(cudalloc_malloc(&p[i], 512, 0), cudaSuccess);
  cr_assert_leq(stats0().reserved_bytes.current, 2 * MiB, "1000 tensors of 512 B fit in one page");
  for (int i = 0; i < 1000; i++) cudalloc_free_sync(p[i]);
  CHECK_CONSISTENT();
}

Test(core_memory, small_and_large_requests_use_separate_regions) {
  core_start(NULL);
  void *small, *large;
  cudalloc_malloc(&small, 4096, 0);
  cudalloc_malloc(&large, 4 * MiB, 0);
  ca_block_t *bs = ca_ptrmap_get(&dev0()->live, (uintptr_t)small);
  ca_block_t *bl = ca_ptrmap_get(&dev0()->live, (uintptr_t)large);
  cr_assert_eq(bs->seg->pool->id, CA_POOL_SMALL);
  cr_assert_eq(bl->seg->pool->id, CA_POOL_LARGE);
}

Test(core_memory, max_split_size_keeps_big_blocks_whole) {
  core_start("expandable_segments:false,max_split_size_mb:40,sim_capacity_mb:512");
  void *big, *small;
  cudalloc_malloc(&big, 64 * MiB, 0);
  cudalloc_free_sync(big);
  cudalloc_step();
  cudalloc_malloc(&small, 30 * MiB, 0);
  cr_assert_neq(small, big, "a 64 MiB block is not split for a request below max_split_size");
  void *again;
  cudalloc_malloc(&again, 60 * MiB, 0);
  cr_assert_eq(again, big, "an oversize request reuses it whole (within 20 MiB of slack)");
  CHECK_CONSISTENT();
}

Test(core_memory, roundup_power2_divisions_rounds_like_pytorch) {
  core_start("roundup_power2_divisions:4");
  void *p;
  cudalloc_malloc(&p, 1200 * 1024, 0);   /* between 1 MiB and 2 MiB: steps of 256 KiB */
  cr_assert_eq(stats0().allocated_bytes.current, 1280 * 1024);
  cr_assert_eq(ca_round_size(1 << 20), 1 << 20, "powers of two are kept");
  cr_assert_eq(ca_round_size(1), 512);
}

Test(core_memory, classic_mode_sizes_segments_like_pytorch) {
  core_start("expandable_segments:false,sim_capacity_mb:512");
  void *a, *b, *c;
  cudalloc_malloc(&a, 100 * 1024, 0);
  cr_assert_eq(stats0().reserved_bytes.current, 2 * MiB);
  cudalloc_malloc(&b, 5 * MiB, 0);
  cr_assert_eq(stats0().reserved_bytes.current, 22 * MiB);
  cudalloc_malloc(&c, 33 * MiB, 0);
  cr_assert_eq(stats0().reserved_bytes.current, 56 * MiB);
  cr_assert_eq(stats0().num_segments.current, 3);
  CHECK_CONSISTENT();
}

Test(core_memory, devices_have_their_own_pools) {
  SKIP_ON_CUDA("two simulated devices");
  core_start("sim_devices:2,sim_capacity_mb:64");
  void *a, *b;
  cr_assert_eq(cudalloc_malloc(&a, 40 * MiB, 0), cudaSuccess);
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  cr_assert_eq(cudalloc_malloc(&b, 40 * MiB, 0), cudaSuccess, "device 1 has its own 64 MiB");
  cudalloc_stats_t s1;
  cudalloc_get_stats(1, &s1);
  cr_assert_eq(s1.allocated_bytes.current, 40 * MiB);
  cr_assert_eq(stats0().allocated_bytes.current, 40 * MiB);
  cr_assert_eq(cudalloc_free_sync(a), cudaSuccess, "a block is freed on its own device from anywhere");
  cr_assert_eq(stats0().allocated_bytes.current, 0);
  cudalloc_free_sync(b);
  CHECK_CONSISTENT();
}
