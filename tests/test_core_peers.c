/* Peer access on two simulated devices, which record set_access per device
 * (ca_sim_access): memory mapped with the virtual memory API is reachable
 * from a peer only where access was granted to it, so enabling a peer must
 * grant it what is mapped already and whatever is mapped later. */
#include "core_testing.h"

TestSuite(core_peers, .fini = cudalloc_shutdown);

static void *alloc_on(int dev, size_t size) {
  void *p = NULL;
  cr_assert_eq(ca_malloc_on(dev, &p, size, NULL, CA_ALLOC_SYNC, NULL), CUDA_SUCCESS);
  return p;
}

static int access_of(int dev, const void *p) { return ca_sim_access(dev, (uintptr_t)p); }

static void peers_reach_old_and_new_mappings(const char *conf) {
  core_start(conf);
  void *before = alloc_on(1, 3 * MiB), *mine = alloc_on(0, 3 * MiB);
  cr_assert(access_of(1, before), "the owner has access");
  cr_assert_not(access_of(0, before), "device 0 has access to device 1's memory before enabling it");
  cr_assert_eq(ca_peer_access_enabled(0, 1), CUDA_SUCCESS);
  cr_assert(access_of(0, before), "enabling did not grant the memory mapped before");
  cr_assert(access_of(0, (char *)before + 3 * MiB - 1));
  void *after = alloc_on(1, 40 * MiB);
  cr_assert(access_of(0, after) && access_of(0, (char *)after + 40 * MiB - 1), "a later map was not granted");
  cr_assert(access_of(1, after));
  cr_assert_not(access_of(1, mine), "access is one way: device 1 did not enable device 0's memory");
  cr_assert_eq(ca_peer_access_enabled(0, 1), CUDA_SUCCESS, "enabling twice changes nothing");
  cr_assert_eq(ca_peer_access_enabled(1, 1), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(ca_peer_access_enabled(2, 1), CUDA_ERROR_INVALID_DEVICE);
  cr_assert_eq(ca_sim_violations(), 0, "a grant broke a rule of the device");
  CHECK_CONSISTENT();
  cr_assert_eq(cudalloc_free_sync(before), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(after), cudaSuccess);
  cr_assert_eq(cudalloc_free_sync(mine), cudaSuccess);
}

Test(core_peers, expandable_segments_grant_peers_old_and_new_pages) {
  SKIP_ON_CUDA("reads the simulated device's access records");
  peers_reach_old_and_new_mappings("sim_devices:2");
}

Test(core_peers, classic_segments_grant_peers_old_and_new_segments) {
  SKIP_ON_CUDA("reads the simulated device's access records");
  peers_reach_old_and_new_mappings("sim_devices:2,expandable_segments:false");
}

/* The twin: without ca_peer_access_enabled, the simulated device keeps the
 * peer out, so the checks above can fail. */
Test(core_peers, without_enabling_the_peer_has_no_access) {
  SKIP_ON_CUDA("reads the simulated device's access records");
  core_start("sim_devices:2");
  void *p = alloc_on(1, 3 * MiB);
  cr_assert_not(access_of(0, p));
  cr_assert_not(access_of(0, (char *)p + 2 * MiB));
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
}

/* A page unmapped and mapped again starts with no access, as on a GPU. */
Test(core_peers, a_remapped_page_is_granted_again) {
  SKIP_ON_CUDA("reads the simulated device's access records");
  core_start("sim_devices:2");
  cr_assert_eq(ca_peer_access_enabled(0, 1), CUDA_SUCCESS);
  void *p = alloc_on(1, 8 * MiB);
  cr_assert_eq(cudalloc_free_sync(p), cudaSuccess);
  cr_assert_eq(cudalloc_empty_cache(), cudaSuccess);   /* pages unmapped and released */
  void *q = alloc_on(1, 8 * MiB);
  cr_assert(access_of(0, q) && access_of(1, q));
  cr_assert_eq(cudalloc_free_sync(q), cudaSuccess);
}
