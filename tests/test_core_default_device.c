/* The default streams' device, remembered by the front cache (alloc/tcache.c
 * stream_device): a front-cache hit and a cached free on the default
 * stream ask the backend nothing while the thread's current context stays,
 * and a context change (cudaSetDevice) between a free and an allocation
 * never hands out a block of the other device. The twin test keeps the
 * remembered device through every change (stale_stream_devices) and is
 * caught. Two simulated devices. */
#include "core_testing.h"
#include "default_pair.h"

#include <pthread.h>

static void sim_only(void) { SKIP_ON_CUDA("two simulated devices and their call counters"); }
static void fini(void) {
  ca_sim_complete_all();
  core_fini();
}
TestSuite(core_default_device, .init = sim_only, .fini = fini);

static uint64_t lookups(void) { return ca_sim_calls(CA_OP_stream_device) + ca_sim_calls(CA_OP_get_device); }

/* A thread that never chose a device (as a program's first cudaMallocAsync
 * is, through the preloaded library): 100 warm pairs on its default stream.
 * Before the simulated device bound device 0 on a default stream's query,
 * as the CUDA backend does, this failed with 200 lookups (the thread had no
 * context, so nothing to remember the device under). */
static void *warm_pairs(void *lookups_out) {
  free_default(alloc_default());
  uint64_t before = lookups(), hits = ca_debug.tcache_hits;
  for (int i = 0; i < 100; i++) free_default(alloc_default());
  cr_assert_eq(ca_debug.tcache_hits - hits, 100, "every warm pair is a front-cache hit");
  *(uint64_t *)lookups_out = lookups() - before;
  return NULL;
}

Test(core_default_device, warm_default_stream_pairs_ask_nothing) {
  core_start("track:caller,sim_events:auto,sim_devices:2");
  uint64_t n = ~0ull;
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, warm_pairs, &n), 0);
  cr_assert_eq(pthread_join(t, NULL), 0);
  cr_assert_eq(n, 0, "no device lookup in 100 warm pairs (%llu)", (unsigned long long)n);
  CHECK_CONSISTENT();
}

/* A block cached on device 0's default stream, then cudaSetDevice(1), then
 * the same request: true when it went to device 1 (a new block there), not
 * to device 0's cached one. */
static bool set_device_between_free_and_alloc_is_seen(bool stale) {
  core_start("track:caller,sim_events:auto,sim_devices:2");
  free_default(alloc_default());   /* warm: the device is remembered, the block cached */
  void *p = alloc_default();
  free_default(p);
  ca_debug.stale_stream_devices = stale;
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  uint64_t hits = ca_debug.tcache_hits;
  void *q = alloc_default();
  cudalloc_stats_t s1;
  cr_assert_eq(cudalloc_get_stats(1, &s1), cudaSuccess);
  bool on_1 = q != p && s1.num_live_blocks.current == 1 && ca_debug.tcache_hits == hits;
  free_default(q);
  ca_debug.stale_stream_devices = false;
  cr_assert_eq(ca_backend_sim.set_device(0), CUDA_SUCCESS);
  return on_1;
}

Test(core_default_device, set_device_between_free_and_alloc_moves_the_default_stream) {
  cr_assert(set_device_between_free_and_alloc_is_seen(false));
  CHECK_CONSISTENT();
}

Test(core_default_device, a_stale_default_device_is_caught) {
  cr_assert_not(set_device_between_free_and_alloc_is_seen(true),
                "with the device kept through cudaSetDevice, device 0's cached block is handed out");
}

/* The free side: a block of device 0 freed on the default stream while
 * device 1 is current is not cached under device 1 (the cache looks at the
 * block's own device), and device 1's next request gets none of device 0's. */
Test(core_default_device, a_free_after_set_device_caches_nothing_for_the_other_device) {
  core_start("track:caller,sim_events:auto,sim_devices:2");
  free_default(alloc_default());
  void *p = alloc_default();
  cr_assert_eq(ca_backend_sim.set_device(1), CUDA_SUCCESS);
  free_default(p);
  void *q = alloc_default();
  cudalloc_stats_t s0, s1;
  cr_assert_eq(cudalloc_get_stats(0, &s0), cudaSuccess);
  cr_assert_eq(cudalloc_get_stats(1, &s1), cudaSuccess);
  cr_assert_neq(q, p);
  cr_assert_eq(s1.num_live_blocks.current, 1, "device 1 serves its own request");
  cr_assert_eq(s0.num_live_blocks.current, 0, "device 0's block is freed, not handed to device 1");
  free_default(q);
  cr_assert_eq(ca_backend_sim.set_device(0), CUDA_SUCCESS);
  CHECK_CONSISTENT();
}
