/* cudaDeviceEnablePeerAccess on the simulated devices, which can all reach
 * each other: as the runtime, a device cannot enable itself or a device that
 * does not exist (cudaErrorInvalidDevice), flags must be 0, and enabling a
 * peer twice is cudaErrorPeerAccessAlreadyEnabled. */
#include "sim_runtime.h"

#include <stdint.h>

static uint64_t enabled[64];   /* atomic: bit p of enabled[d]: d reaches p */

cudaError_t ca_sim_rt_enable_peer(int dev, int peer, unsigned flags) {
  int count = 0;
  if (flags) return ca_rt_error(cudaErrorInvalidValue);
  if (ca_backend_sim.device_count(&count) != CUDA_SUCCESS || peer < 0 || peer >= count || peer == dev ||
      dev < 0 || dev >= 64)
    return ca_rt_error(cudaErrorInvalidDevice);
  uint64_t bit = 1ull << peer, was = __atomic_fetch_or(&enabled[dev], bit, __ATOMIC_ACQ_REL);
  return was & bit ? ca_rt_error(cudaErrorPeerAccessAlreadyEnabled) : cudaSuccess;
}
