/* A program with the CUDA runtime linked statically (nvcc's default), whose
 * calls never reach a preloaded cudalloc: on the simulated device, where
 * there is no driver for that runtime to load, its first call fails with
 * cudaErrorInsufficientDriver, and cudalloc must say why at start. Built
 * twice (shim/shim.mk): static_cudart, with its symbol table, and
 * static_cudart_stripped, stripped but with a section named like nvcc's
 * registered device code (.nvFatBinSegment), as a stripped nvcc program. */
#include "progs.h"

#ifdef FAKE_FATBIN_SECTION
__attribute__((used, section(".nvFatBinSegment"))) static const char fatbin_segment[24] = "not device code";
#endif

int main(void) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, 1 << 20);
  printf("static_cudart: cudaMalloc returned %d\n", (int)e);
  if (e == cudaSuccess) cudaFree(p);
  printf("static_cudart: ok\n");
  return 0;
}
