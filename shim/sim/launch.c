/* Kernel launches on the simulated device, which cannot run device code:
 * every launch fails with "no kernel image is available for the device"
 * (cudaErrorNoKernelImageForDevice, CUDA_ERROR_NO_BINARY_FOR_GPU, both 209:
 * what a GPU answers for a kernel built for no architecture it has), left
 * for cudaGetLastError, with one line on stderr that says why. A launch that
 * returned success would let a program read results no kernel wrote.
 *
 * With CUDA, the runtime calls go to the real runtime, and the driver's
 * launchers are never replaced (symbols.h, CA_SYMS_SIM_DRIVER). Either way
 * a runtime launch tells the core its stream first: a kernel on a stream
 * other than the legacy one (a per-thread stream included) ends the legacy
 * queue's mode before it is issued (alloc/legacyq.c).
 */
#include "sim_runtime.h"
#include "log.h"

#define NO_KERNELS                                                                           \
  "the simulated device (backend:sim) cannot run kernels: the launch fails with no kernel " \
  "image for the device; run kernels on a GPU, or their C reference on the simulated device"

/* Once per process, whichever API launched first. */
static void say_once(const char *call) {
  static int said;
  if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) ca_log("%s: " NO_KERNELS, call);
}

static cudaError_t rt_refused(const char *call) {
  say_once(call);
  return ca_rt_error(cudaErrorNoKernelImageForDevice);
}

static CUresult drv_refused(const char *call) {
  say_once(call);
  return CUDA_ERROR_NO_BINARY_FOR_GPU;
}

CA_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shared,
                                       cudaStream_t stream) {
  ca_stream_used(stream);
  CA_SIM_ONLY(cudaLaunchKernel, func, grid, block, args, shared, stream);
  return rt_refused("cudaLaunchKernel");
}

CA_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 grid, dim3 block, void **args,
                                            size_t shared, cudaStream_t stream) {
  ca_stream_used(ca_ptsz(stream));
  CA_SIM_ONLY(cudaLaunchKernel_ptsz, func, grid, block, args, shared, stream);
  return rt_refused("cudaLaunchKernel");
}

CA_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, unsigned shared, CUstream stream, void **params,
                                  void **extra) {
  if (!ca_shim_sim()) return CA_REAL_DRV(cuLaunchKernel, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  return drv_refused("cuLaunchKernel");
}

CA_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                       unsigned by, unsigned bz, unsigned shared, CUstream stream,
                                       void **params, void **extra) {
  if (!ca_shim_sim())
    return CA_REAL_DRV(cuLaunchKernel_ptsz, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra);
  return drv_refused("cuLaunchKernel");
}
