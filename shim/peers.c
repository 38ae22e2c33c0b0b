/* Peer access: cudaDeviceEnablePeerAccess and cuCtxEnablePeerAccess.
 *
 * Enabling lets kernels of the current device touch the peer's memory, but
 * not memory mapped with the virtual memory API, which a device reaches only
 * where cuMemSetAccess named it. So once the real call (or the simulated
 * device) has enabled it, the core grants the current device access to the
 * peer's memory, mapped so far and mapped later. Disabling is left to the
 * real library: the grants stay, which lets no kernel touch what it could
 * not touch while access was enabled.
 */
#include "shim.h"
#include "sim/sim_runtime.h"

CA_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned flags) {
  CA_ENTER(CA_REAL_RT(cudaDeviceEnablePeerAccess, peer, flags));
  int dev = ca_device_current();
  cudaError_t err = ca_shim_sim() ? ca_sim_rt_enable_peer(dev, peer, flags)
                                  : CA_REAL_RT(cudaDeviceEnablePeerAccess, peer, flags);
  return err != cudaSuccess ? err : ca_rt_result(ca_peer_access_enabled(dev, peer));
}

/* The simulated device has no contexts to name a peer by. */
CA_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer_ctx, unsigned flags) {
  CA_ENTER(CA_REAL_DRV(cuCtxEnablePeerAccess, peer_ctx, flags));
  CUresult rc = CA_PASS_DRV(CUDA_ERROR_INVALID_CONTEXT, cuCtxEnablePeerAccess, peer_ctx, flags);
  int peer = -1;
  if (rc == CUDA_SUCCESS) rc = ca_real_ctx_device(peer_ctx, &peer);
  return rc != CUDA_SUCCESS ? rc : ca_peer_access_enabled(ca_device_current(), peer);
}
