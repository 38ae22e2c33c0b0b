/* The runtime calls that only the simulated device needs: with a real GPU
 * the real runtime serves them, and these files are never reached.
 *
 *   runtime.c  devices, synchronization, copies and fills
 *   events.c   runtime events and stream queries
 *   streams.c  stream creation and graph capture
 *   launch.c   kernel launches, which fail with a clear error
 *   peers.c    peer access between simulated devices
 *   static_runtime.c  a statically linked runtime, named at load
 */
#ifndef CUDALLOC_SHIM_SIM_RUNTIME_H
#define CUDALLOC_SHIM_SIM_RUNTIME_H

#include "shim.h"

/* The simulated device, started; NULL when the program runs on CUDA. */
const ca_backend_t *ca_shim_sim_backend(void);

/* Opens a runtime call served only on the simulated device: with CUDA it
 * goes to the real runtime untouched. Leaves the device in `be`. */
#define CA_SIM_OR_REAL(name, ...)                              \
  const ca_backend_t *be = ca_shim_sim_backend();              \
  if (!be) return CA_REAL_RT(name, __VA_ARGS__)
/* The same, for a call that needs nothing from the device. */
#define CA_SIM_ONLY(name, ...) \
  if (!ca_shim_sim_backend()) return CA_REAL_RT(name, __VA_ARGS__)

/* "streams.c": as cuStreamCreate, cuStreamDestroy, cuStreamBeginCapture_v2
 * (mode: CU_STREAM_CAPTURE_MODE_*, which the runtime's modes equal) and
 * cuStreamEndCapture answer (the simulated device records no graph). */
CUresult ca_sim_rt_stream_create(ca_stream_t *stream, unsigned flags);
CUresult ca_sim_rt_stream_destroy(ca_stream_t stream);
CUresult ca_sim_rt_capture_begin(ca_stream_t stream, int mode);
CUresult ca_sim_rt_capture_end(ca_stream_t stream, CUgraph *graph);

/* "static_runtime.c": says on stderr when the program links the runtime
 * statically, whose calls the simulated device never sees. */
void ca_sim_rt_check_static_runtime(void);

/* "peers.c": cudaDeviceEnablePeerAccess(peer, flags) from device dev. */
cudaError_t ca_sim_rt_enable_peer(int dev, int peer, unsigned flags);

/* "runtime.c": cudaMemcpyAsync on the simulated device: the bytes move at
 * once, and the copy is work on stream that touches both ranges (site: the
 * calling site) until the stream gets there. */
cudaError_t ca_sim_rt_copy_async(ca_stream_t stream, void *dst, const void *src, size_t n,
                                 enum cudaMemcpyKind kind, void *site);

#endif /* CUDALLOC_SHIM_SIM_RUNTIME_H */
