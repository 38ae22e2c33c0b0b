/* A library that calls the runtime, built three times for
 * tests/progs/rtld_local.c, each linked against another runtime:
 * libscope_caller3.so (libscope_rt3.so), libscope_caller5.so
 * (libscope_rt5.so) and libscope_caller_cudart.so (the real libcudart). The
 * program loads them RTLD_LOCAL, as Python loads extension modules, so no
 * runtime is in the global scope: cudalloc must find the one of the library
 * the call came from. */
#include <cuda_runtime_api.h>

#define API __attribute__((visibility("default")))

/* What the runtime answered: device count and its code, cudaStreamCreate's
 * code, and the cudaGetLastError after it. */
API void scope_probe(int out[4]) {
  cudaStream_t s = NULL;
  int n = -1;
  out[1] = cudaGetDeviceCount(&n);
  out[0] = n;
  out[2] = cudaStreamCreate(&s);
  out[3] = cudaGetLastError();
  if (out[2] == cudaSuccess) cudaStreamDestroy(s);
}
