/* For the programs that drive a driver library directly (the tests' fake
 * libcuda.so.1, named on the command line): its entry points found
 * through its own cuGetProcAddress_v2, as the runtime finds them, so that
 * a preloaded cudalloc serves exactly what it would serve the runtime. */
#ifndef CUDALLOC_DRIVER_PROCS_H
#define CUDALLOC_DRIVER_PROCS_H

#include "progs.h"

#include <cuda.h>
#include <cudaTypedefs.h>

/* What the fake driver's cuMemAlloc family answers. */
#define FAKE_PTR ((CUdeviceptr)0xfa4e0000ull)

static PFN_cuGetProcAddress_v12000 gpa;

static inline void *proc(const char *symbol, int version) {
  void *fn = NULL;
  CUdriverProcAddressQueryResult status;
  CUresult rc = gpa(symbol, &fn, version, 0, &status);
  return rc == CUDA_SUCCESS && status == CU_GET_PROC_ADDRESS_SUCCESS ? fn : NULL;
}

/* Loads the driver at path (local scope) and its resolver. */
static inline void open_driver(const char *path) {
  void *driver = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
  CHECK(driver != NULL);
  *(void **)&gpa = dlsym(driver, "cuGetProcAddress_v2");
  CHECK(gpa != NULL);
}

/* The primary context of device 0 made current, as the runtime does
 * before a program's first call. */
static inline void make_primary_current(void) {
  CUresult (*init)(unsigned) = proc("cuInit", 2000);
  CUresult (*device_get)(CUdevice *, int) = proc("cuDeviceGet", 2000);
  CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain", 7000);
  CUresult (*set_current)(CUcontext) = proc("cuCtxSetCurrent", 4000);
  CHECK(init && device_get && retain && set_current);
  CUdevice dev;
  CUcontext ctx;
  CHECK(init(0) == CUDA_SUCCESS && device_get(&dev, 0) == CUDA_SUCCESS);
  CHECK(retain(&ctx, dev) == CUDA_SUCCESS && set_current(ctx) == CUDA_SUCCESS);
}

#endif /* CUDALLOC_DRIVER_PROCS_H */
