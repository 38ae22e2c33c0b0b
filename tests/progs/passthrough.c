/* A device cudalloc does not serve: run under the preload with
 * backend:cuda and the fake driver (tests/fake/libcuda.c) started with
 * FAKE_CUDA_NO_VMM=1, the core refuses the device (no virtual memory
 * management), and the driver-API allocation goes to the driver's own
 * allocator, whose FAKE_PTR tells its memory apart; the free follows it.
 *
 *   passthrough <driver>   the driver library to open
 */
#include "driver_procs.h"

int main(int argc, char **argv) {
  open_driver(argc > 1 ? argv[1] : NULL);
  CUresult (*init)(unsigned) = proc("cuInit", 2000);
  CUresult (*device_get)(CUdevice *, int) = proc("cuDeviceGet", 2000);
  CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain", 7000);
  CUresult (*set_current)(CUcontext) = proc("cuCtxSetCurrent", 4000);
  CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc", 12000);
  CUresult (*release)(CUdeviceptr) = proc("cuMemFree", 12000);
  CHECK(init && device_get && retain && set_current && alloc && release);
  CUdevice dev;
  CUcontext ctx;
  CHECK(init(0) == CUDA_SUCCESS && device_get(&dev, 0) == CUDA_SUCCESS);
  CHECK(retain(&ctx, dev) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS);
  CHECK(served_by_cudalloc((void *)alloc));   /* cudalloc's entry point... */
  CUdeviceptr d = 0;
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS);
  CHECK(d == FAKE_PTR);                        /* ...but the driver's memory */
  CHECK(release(d) == CUDA_SUCCESS);
  CHECK(alloc(&d, 1 << 20) == CUDA_SUCCESS && d == FAKE_PTR);   /* and again, without a second word */
  CHECK(release(d) == CUDA_SUCCESS);
  puts("passthrough: ok");
  return 0;
}
