/* Stream-ordered allocation on several streams (blocking, non-blocking,
 * the per-thread default stream): each stream allocates, fills, copies
 * back and frees in its own order; events time the work. */
#include "progs.h"

enum { NSTREAMS = 4, ROUNDS = 50, SIZE = 256 * 1024 };

int main(void) {
  cudaStream_t s[NSTREAMS];
  CUDA_OK(cudaStreamCreate(&s[0]));
  CUDA_OK(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithPriority(&s[2], cudaStreamDefault, 0));
  s[3] = cudaStreamPerThread;
  cudaEvent_t start, stop;
  CUDA_OK(cudaEventCreate(&start));
  CUDA_OK(cudaEventCreateWithFlags(&stop, cudaEventDefault));
  CUDA_OK(cudaEventRecord(start, s[0]));

  unsigned char *back[NSTREAMS];
  for (int k = 0; k < NSTREAMS; k++) CHECK((back[k] = malloc(SIZE)));
  for (int r = 0; r < ROUNDS; r++) {
    void *p[NSTREAMS];
    for (int k = 0; k < NSTREAMS; k++) {
      size_t n = SIZE - (size_t)(r * 97 + k * 13) % 4096;
      CUDA_OK(cudaMallocAsync(&p[k], n, s[k]));
      CUDA_OK(cudaMemsetAsync(p[k], r + k, n, s[k]));
      CUDA_OK(cudaMemcpyAsync(back[k], p[k], n, cudaMemcpyDeviceToHost, s[k]));
      CUDA_OK(cudaFreeAsync(p[k], s[k]));
    }
    for (int k = 0; k < NSTREAMS; k++) {
      CUDA_OK(cudaStreamSynchronize(s[k]));
      CHECK(back[k][0] == (unsigned char)(r + k) && back[k][SIZE - 4096 - 1] == (unsigned char)(r + k));
    }
  }

  CUDA_OK(cudaEventRecord(stop, s[0]));
  CUDA_OK(cudaEventSynchronize(stop));
  CUDA_OK(cudaEventQuery(stop));
  float ms = -1;
  CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
  CHECK(ms >= 0);
  CUDA_OK(cudaStreamQuery(s[1]));
  CUDA_OK(cudaDeviceSynchronize());

  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) {
    CHECK(st.num_live_blocks.current == 0);
    CHECK(st.num_allocs.total >= NSTREAMS * ROUNDS);
    /* stream-ordered frees are reused on their stream: far fewer pages than rounds */
    CHECK(st.backend_create.total < NSTREAMS * ROUNDS / 4);
  }
  CUDA_OK(cudaEventDestroy(start));
  CUDA_OK(cudaEventDestroy(stop));
  for (int k = 0; k < 3; k++) CUDA_OK(cudaStreamDestroy(s[k]));
  for (int k = 0; k < NSTREAMS; k++) free(back[k]);
  printf("async_streams: ok (%.3f ms)\n", ms);
  return 0;
}
