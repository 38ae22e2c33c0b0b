/* cudaDeviceReset: the device's memory is gone, cudalloc's pools with it;
 * the program allocates again afterwards as from a fresh device. */
#include "progs.h"

#define MiB ((size_t)1 << 20)

static long long live_blocks(void) {
  cudalloc_stats_t st;
  return cudalloc_stats_of(-1, &st) ? st.num_live_blocks.current : -1;
}

static void round_trip(size_t n, unsigned seed) {
  unsigned char *host = malloc(n), *back = malloc(n);
  void *dev = NULL;
  pattern_fill(host, n, seed);
  CUDA_OK(cudaMalloc(&dev, n));
  CUDA_OK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  CHECK(pattern_ok(back, n, seed));
  CUDA_OK(cudaFree(dev));
  free(host);
  free(back);
}

int main(void) {
  void *p = NULL, *q = NULL;
  round_trip(2 * MiB, 1);
  CUDA_OK(cudaMalloc(&p, 1 * MiB));
  CUDA_OK(cudaMalloc(&q, 3 * MiB));
  CHECK(live_blocks() == 2 || live_blocks() == -1);
  CUDA_OK(cudaDeviceReset());
  CHECK(live_blocks() == 0 || live_blocks() == -1);
  round_trip(5 * MiB, 2);
  CUDA_OK(cudaMalloc(&p, 1 * MiB));
  CUDA_OK(cudaFree(p));
  CHECK(live_blocks() == 0 || live_blocks() == -1);
  printf("reset: ok\n");
  return 0;
}
