/* A program built for the per-thread default stream (nvcc
 * --default-stream per-thread): its calls are the _ptsz/_ptds entry points,
 * and the NULL stream means the calling thread's own stream. */
#define CUDA_API_PER_THREAD_DEFAULT_STREAM 1
#include "progs.h"

#include <pthread.h>

enum { SIZE = 1 << 20, THREADS = 4, ROUNDS = 20 };

static void *worker(void *arg) {
  unsigned seed = (unsigned)(size_t)arg;
  unsigned char *host = malloc(SIZE), *back = malloc(SIZE);
  pattern_fill(host, SIZE, seed);
  for (int r = 0; r < ROUNDS; r++) {
    void *p = NULL;
    CUDA_OK(cudaMallocAsync(&p, SIZE, 0));
    CUDA_OK(cudaMemcpyAsync(p, host, SIZE, cudaMemcpyHostToDevice, 0));
    CUDA_OK(cudaMemsetAsync(p, 0, 16, 0));
    CUDA_OK(cudaStreamSynchronize(0));
    CUDA_OK(cudaMemcpy(back, p, SIZE, cudaMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++) CHECK(back[i] == 0);
    for (size_t i = 16; i < SIZE; i++) CHECK(back[i] == (unsigned char)(i * 31u + seed));
    CUDA_OK(cudaFreeAsync(p, 0));
  }
  cudaEvent_t ev;
  CUDA_OK(cudaEventCreate(&ev));
  CUDA_OK(cudaEventRecord(ev, 0));
  CUDA_OK(cudaEventSynchronize(ev));
  CUDA_OK(cudaStreamQuery(0));
  CUDA_OK(cudaEventDestroy(ev));
  free(host);
  free(back);
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(size_t)(i + 1)) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) CHECK(st.num_live_blocks.current == 0 && st.num_allocs.total >= THREADS * ROUNDS);
  printf("ptsz: ok\n");
  return 0;
}
