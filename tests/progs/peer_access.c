/* Peer access on two simulated devices (sim_devices:2): enabling device 1
 * from device 0 makes cudalloc grant device 0 access to device 1's memory,
 * mapped so far (set-access calls of device 1 grow at once) and mapped
 * later (each grant names both devices); the runtime's answers for bad
 * input and for enabling twice. Which device may touch which byte is
 * checked where the simulated device can be asked (tests/test_core_peers.c). */
#include "progs.h"

#define MiB ((size_t)1 << 20)

static long set_access_calls(int dev) {
  cudalloc_stats_t st;
  CHECK(cudalloc_stats_of(dev, &st));
  return (long)st.backend_set_access.total;
}

int main(void) {
  if (!on_simulated_device()) {
    printf("peer_access: skipped (counts the simulated device's calls)\n");
    return 0;
  }
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  CHECK(n == 2);
  void *a = NULL, *b = NULL;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaMalloc(&a, 3 * MiB));
  long before = set_access_calls(1);
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaDeviceEnablePeerAccess(1, 0));
  CHECK(set_access_calls(1) > before);   /* what device 1 had mapped is granted to device 0 */
  CUDA_EXPECT(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
  CUDA_EXPECT(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
  CUDA_EXPECT(cudaDeviceEnablePeerAccess(2, 0), cudaErrorInvalidDevice);
  CUDA_EXPECT(cudaDeviceEnablePeerAccess(-1, 0), cudaErrorInvalidDevice);
  CUDA_EXPECT(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
  (void)cudaGetLastError();

  CUDA_OK(cudaSetDevice(1));
  long mid = set_access_calls(1);
  CUDA_OK(cudaMalloc(&b, 40 * MiB));
  long grants = set_access_calls(1) - mid;
  CHECK(grants >= 2 && grants % 2 == 0);   /* every grant of a new map names both devices */
  long own = set_access_calls(0);
  CUDA_OK(cudaSetDevice(0));
  void *c = NULL;
  CUDA_OK(cudaMalloc(&c, 40 * MiB));
  CHECK(set_access_calls(0) - own >= 1);
  CUDA_OK(cudaFree(c));
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(b));
  printf("peer_access: ok\n");
  return 0;
}
