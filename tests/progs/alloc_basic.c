/* Allocate, write from the host, read back, free: plain, pitched and 3D
 * allocations, many sizes, through the runtime API. */
#include "progs.h"

#include <stdint.h>

/* Round trip of n bytes through a fresh allocation. */
static void round_trip(size_t n, unsigned seed) {
  unsigned char *host = malloc(n), *back = malloc(n);
  void *dev = NULL;
  CHECK(host && back);
  pattern_fill(host, n, seed);
  CUDA_OK(cudaMalloc(&dev, n));
  CHECK(dev != NULL);
  CUDA_OK(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice));
  memset(back, 0, n);
  CUDA_OK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  CHECK(pattern_ok(back, n, seed));
  CUDA_OK(cudaMemset(dev, 0x5a, n / 2));
  CUDA_OK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; i++) CHECK(back[i] == (i < n / 2 ? 0x5a : (unsigned char)(i * 31u + seed)));
  CUDA_OK(cudaFree(dev));
  free(host);
  free(back);
}

/* Blocks live at the same time do not overlap, and keep their contents. */
static void many_live(void) {
  enum { N = 64 };
  void *dev[N];
  size_t size[N];
  for (int i = 0; i < N; i++) {
    size[i] = (size_t)512 << (i % 12);
    unsigned char *host = malloc(size[i]);
    pattern_fill(host, size[i], (unsigned)i);
    CUDA_OK(cudaMalloc(&dev[i], size[i]));
    CUDA_OK(cudaMemcpy(dev[i], host, size[i], cudaMemcpyHostToDevice));
    free(host);
  }
  for (int i = 0; i < N; i++) {
    unsigned char *back = malloc(size[i]);
    CUDA_OK(cudaMemcpy(back, dev[i], size[i], cudaMemcpyDeviceToHost));
    CHECK(pattern_ok(back, size[i], (unsigned)i));
    free(back);
  }
  for (int i = 0; i < N; i++) CUDA_OK(cudaFree(dev[i]));
}

static void pitched(void) {
  void *dev = NULL;
  size_t pitch = 0;
  CUDA_OK(cudaMallocPitch(&dev, &pitch, 1000, 7));
  CHECK(dev != NULL && pitch >= 1000 && pitch % 256 == 0);
  unsigned char row[1000];
  pattern_fill(row, sizeof row, 9);
  CUDA_OK(cudaMemcpy((char *)dev + 6 * pitch, row, sizeof row, cudaMemcpyHostToDevice));
  memset(row, 0, sizeof row);
  CUDA_OK(cudaMemcpy(row, (char *)dev + 6 * pitch, sizeof row, cudaMemcpyDeviceToHost));
  CHECK(pattern_ok(row, sizeof row, 9));
  CUDA_OK(cudaFree(dev));

  struct cudaPitchedPtr p3;
  CUDA_OK(cudaMalloc3D(&p3, (struct cudaExtent){.width = 300, .height = 4, .depth = 5}));
  CHECK(p3.ptr != NULL && p3.pitch >= 300 && p3.xsize == 300 && p3.ysize == 4);
  CUDA_OK(cudaMemset((char *)p3.ptr + p3.pitch * 19, 7, 300));   /* the last row */
  CUDA_OK(cudaFree(p3.ptr));
}

/* Pinned host memory as a staging buffer. */
static void pinned(void) {
  enum { N = 1 << 20 };
  unsigned char *h = NULL, *h2 = NULL;
  void *dev = NULL;
  CUDA_OK(cudaMallocHost((void **)&h, N));
  CUDA_OK(cudaHostAlloc((void **)&h2, N, cudaHostAllocDefault));
  CHECK(h && h2 && h != h2);
  pattern_fill(h, N, 3);
  CUDA_OK(cudaMalloc(&dev, N));
  CUDA_OK(cudaMemcpyAsync(dev, h, N, cudaMemcpyHostToDevice, 0));
  CUDA_OK(cudaMemcpyAsync(h2, dev, N, cudaMemcpyDeviceToHost, 0));
  CUDA_OK(cudaStreamSynchronize(0));
  CHECK(pattern_ok(h2, N, 3));
  CUDA_OK(cudaFree(dev));
  CUDA_OK(cudaFreeHost(h));
  CUDA_OK(cudaFreeHost(h2));
}

int main(void) {
  for (unsigned i = 0; i < 24; i++) round_trip((size_t)1 << i, i);
  round_trip(3 * 1000 * 1000 + 17, 99);
  many_live();
  pitched();
  pinned();
  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) {
    CHECK(st.num_live_blocks.current == 0);
    CHECK(st.num_allocs.total >= 24 + 1 + 64 + 2 + 1);
    printf("alloc_basic: served by cudalloc, %lld allocations\n", (long long)st.num_allocs.total);
  }
  printf("alloc_basic: ok\n");
  return 0;
}
