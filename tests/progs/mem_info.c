/* cudaMemGetInfo before and after allocating and freeing: allocated memory
 * is not free, freed memory is (cudalloc's cache counts as free), and free
 * never exceeds the total. Prints the figures for the test to compare. */
#include "progs.h"

#define MiB ((size_t)1 << 20)

int main(void) {
  size_t free0, total0, free1, total1, free2, total2;
  CUDA_OK(cudaMemGetInfo(&free0, &total0));
  CHECK(total0 > 0 && free0 <= total0);

  void *p[8];
  for (int i = 0; i < 8; i++) CUDA_OK(cudaMalloc(&p[i], 8 * MiB));
  CUDA_OK(cudaMemGetInfo(&free1, &total1));
  CHECK(total1 == total0 && free1 <= total1);
  CHECK(free1 + 64 * MiB <= free0);

  for (int i = 0; i < 8; i++) CUDA_OK(cudaFree(p[i]));
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemGetInfo(&free2, &total2));
  CHECK(total2 == total0 && free2 <= total2);
  CHECK(free2 >= free1 + 64 * MiB);

  printf("total=%zu free_before=%zu free_allocated=%zu free_after=%zu\n", total0, free0, free1, free2);
  printf("mem_info: ok\n");
  return 0;
}
