/* A stand-in for libcudart, built twice (FAKE_COUNT=3 and 5) as
 * libscope_rt3.so and libscope_rt5.so, for tests/progs/rtld_local.c: it
 * answers cudaGetDeviceCount with its own count, and its cudaStreamCreate
 * fails with cudaErrorNotPermitted, left as its last error. */
#include <cuda_runtime_api.h>

#define API __attribute__((visibility("default")))

static __thread cudaError_t last;

API cudaError_t cudaGetDeviceCount(int *count) {
  *count = FAKE_COUNT;
  return cudaSuccess;
}

API cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  (void)stream;
  return last = cudaErrorNotPermitted;
}

API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  (void)stream;
  return cudaSuccess;
}

API cudaError_t cudaGetLastError(void) {
  cudaError_t e = last;
  last = cudaSuccess;
  return e;
}
