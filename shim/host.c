/* Pinned host memory: cudaMallocHost, cudaHostAlloc, cudaFreeHost.
 *
 * With the CUDA backend these go to the real runtime (a pinned cache in the
 * core is not built yet); the simulated device serves them from host
 * memory (shim/sim/host.c). */
#include "shim.h"
#include "sim/sim_runtime.h"

CA_EXPORT cudaError_t cudaMallocHost(void **ptr, size_t size) {
  if (!ca_shim_sim()) return CA_REAL_RT(cudaMallocHost, ptr, size);
  return ca_sim_rt_host_alloc(ptr, size);
}

CA_EXPORT cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned flags) {
  if (!ca_shim_sim()) return CA_REAL_RT(cudaHostAlloc, ptr, size, flags);
  return ca_sim_rt_host_alloc(ptr, size);
}

CA_EXPORT cudaError_t cudaFreeHost(void *ptr) {
  if (!ca_shim_sim()) return CA_REAL_RT(cudaFreeHost, ptr);
  return ca_sim_rt_host_free(ptr);
}
