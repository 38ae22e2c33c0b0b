/* The raw CUDA driver for the GPU check's probes (bench/gpu/), reached the
 * way alloc/backend/cuda.c reaches it: dlopen("libcuda.so.1"), then every
 * entry point through cuGetProcAddress at the CUDA 12.0 ABI. Nothing here
 * goes through cudalloc: the probes run without the preload and print what
 * the driver itself answers.
 *
 * Written in the C subset that nvcc's C++ also accepts (the probes that
 * launch kernels are .cu files). */
#ifndef CUDALLOC_GPU_DRIVER_H
#define CUDALLOC_GPU_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DRV_ABI 12000   /* the version alloc/backend/cuda.c asks for */

typedef struct drv_lib_s {
  void *handle;
  PFN_cuGetProcAddress_v12000 gpa;
  PFN_cuGetProcAddress_v11030 gpa_v1;   /* a driver older than CUDA 12.0 */
  PFN_cuGetErrorName_v6000 error_name;
} drv_lib_t;

static drv_lib_t drv_lib;

/* Opens the driver: NULL on success, else why it cannot be used. */
static inline const char *drv_open(void) {
  static char why[512];
  drv_lib.handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!drv_lib.handle) {
    const char *err = dlerror();
    snprintf(why, sizeof why, "no CUDA driver: cannot load libcuda.so.1 (%s)", err ? err : "not found");
    return why;
  }
  *(void **)&drv_lib.gpa = dlsym(drv_lib.handle, "cuGetProcAddress_v2");
  if (!drv_lib.gpa) *(void **)&drv_lib.gpa_v1 = dlsym(drv_lib.handle, "cuGetProcAddress");
  if (!drv_lib.gpa && !drv_lib.gpa_v1) return "libcuda.so.1 has no cuGetProcAddress: a driver older than CUDA 11.3";
  *(void **)&drv_lib.error_name = dlsym(drv_lib.handle, "cuGetErrorName");
  return NULL;
}

/* The entry point sym as a CUDA 12.0 program gets it, or NULL. */
static inline void *drv_proc(const char *sym) {
  void *fn = NULL;
  if (drv_lib.gpa) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    if (drv_lib.gpa(sym, &fn, DRV_ABI, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
      fn = NULL;
  } else if (drv_lib.gpa_v1(sym, &fn, DRV_ABI, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) {
    fn = NULL;
  }
  return fn;
}

/* "CUDA_ERROR_INVALID_VALUE (1)": the name the driver gives a code. */
static inline const char *drv_code(CUresult rc) {
  static __thread char buf[96];
  const char *name = NULL;
  if (!drv_lib.error_name || drv_lib.error_name(rc, &name) != CUDA_SUCCESS || !name) name = "unnamed";
  snprintf(buf, sizeof buf, "%s (%d)", name, (int)rc);
  return buf;
}

static inline double drv_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

#endif /* CUDALLOC_GPU_DRIVER_H */
