/* The mistakes a program can make, answered with the codes the CUDA
 * documentation gives, and left for cudaGetLastError. */
#include "progs.h"

#include <stdint.h>

int main(void) {
  void *p = (void *)0x1;

  /* NULL out-pointer */
  CUDA_EXPECT(cudaMalloc(NULL, 16), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaGetLastError(), cudaSuccess);
  CUDA_EXPECT(cudaMallocAsync(NULL, 16, 0), cudaErrorInvalidValue);
  size_t pitch;
  CUDA_EXPECT(cudaMallocPitch(NULL, &pitch, 16, 16), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaMallocPitch(&p, NULL, 16, 16), cudaErrorInvalidValue);
  size_t total;
  CUDA_EXPECT(cudaMemGetInfo(NULL, &total), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaPeekAtLastError(), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaPeekAtLastError(), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorInvalidValue);

  /* size 0: success and a NULL pointer, which may be freed */
  p = (void *)0x1;
  CUDA_OK(cudaMalloc(&p, 0));
  CHECK(p == NULL);
  CUDA_OK(cudaFree(p));
  CUDA_OK(cudaFree(NULL));

  /* absurd size */
  p = (void *)0x1;
  CUDA_EXPECT(cudaMalloc(&p, (size_t)1 << 62), cudaErrorMemoryAllocation);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
  CUDA_EXPECT(cudaMallocAsync(&p, SIZE_MAX, 0), cudaErrorMemoryAllocation);
  CUDA_EXPECT(cudaMallocPitch(&p, &pitch, SIZE_MAX / 2, 4), cudaErrorMemoryAllocation);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);

  /* double free, and an interior pointer */
  void *a = NULL;
  CUDA_OK(cudaMalloc(&a, 4096));
  CUDA_EXPECT(cudaFree((char *)a + 256), cudaErrorInvalidValue);
  CUDA_OK(cudaFree(a));
  CUDA_EXPECT(cudaFree(a), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  CUDA_OK(cudaMalloc(&a, 4096));
  CUDA_OK(cudaFreeAsync(a, 0));
  CUDA_EXPECT(cudaFreeAsync(a, 0), cudaErrorInvalidValue);

  /* a pointer cudalloc never gave out (host memory) */
  void *host = malloc(64);
  CUDA_EXPECT(cudaFree(host), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaFreeAsync(host, 0), cudaErrorInvalidValue);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorInvalidValue);
  free(host);

  /* the allocator is intact after all that */
  CUDA_OK(cudaMalloc(&a, 1 << 20));
  CUDA_OK(cudaMemset(a, 1, 1 << 20));
  CUDA_OK(cudaFree(a));
  CUDA_EXPECT(cudaGetLastError(), cudaSuccess);
  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) {
    CHECK(st.num_live_blocks.current == 0);
    CHECK(st.num_bad_frees.total >= 3);
  }
  printf("bad_inputs: ok\n");
  return 0;
}
