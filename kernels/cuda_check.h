/* Error checks with file and line for every CUDA runtime call and launch,
 * plus a HINT when the cause is the usual one. C and CUDA C++. */
#ifndef KERNELS_CUDA_CHECK_H
#define KERNELS_CUDA_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime_api.h>

#define CEIL_DIV(a, b) (((a) + (b)-1) / (b))

static inline const char *cuda_hint(cudaError_t err) {
  switch (err) {
  case cudaErrorInsufficientDriver:
  case cudaErrorNoDevice:
  case cudaErrorInitializationError:
  case cudaErrorStubLibrary:
    return "no GPU or driver here. Run the C-reference build on cudalloc's simulated device: "
           "LD_PRELOAD=build/libcudalloc.so CUDALLOC_CONF=backend:sim build/workload";
  case cudaErrorMemoryAllocation:
    return "out of device memory: lower --max-batch/--max-frames/--max-audio, or raise "
           "sim_capacity_mb in CUDALLOC_CONF on the simulated device";
  case cudaErrorNoKernelImageForDevice:
  case cudaErrorUnsupportedPtxVersion:
    return "the kernels were built for another GPU: rebuild with NVCC_ARCH=-arch=native";
  case cudaErrorInvalidConfiguration:
    return "a launch with an impossible grid: check the launcher's shape asserts";
  default:
    return NULL;
  }
}

static inline void cuda_check_at(cudaError_t err, const char *what, const char *file,
                                 int line) {
  if (err == cudaSuccess) return;
  fprintf(stderr, "[CUDA ERROR] %s at %s:%d: %s (%s, %d)\n", what, file, line,
          cudaGetErrorString(err), cudaGetErrorName(err), (int)err);
  const char *hint = cuda_hint(err);
  if (hint) fprintf(stderr, "HINT: %s\n", hint);
  exit(EXIT_FAILURE);
}

#define cuda_check(call) cuda_check_at((call), #call, __FILE__, __LINE__)

/* Threads per block of the elementwise kernels. */
#define KERNEL_BLOCK 256

#endif /* KERNELS_CUDA_CHECK_H */
