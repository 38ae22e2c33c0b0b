/* Many threads allocating and freeing at once, synchronously and on
 * streams of their own, each checking that its blocks keep their contents
 * (no block is handed to two threads). Half the sizes are small (up to
 * 8 KiB), so that stream-ordered pairs go through the front caches. */
#include "progs.h"

#include <pthread.h>
#include <stdint.h>

enum { THREADS = 8, ROUNDS = 300, LIVE = 8 };

static uint64_t next_random(uint64_t *s) {   /* splitmix64 */
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void *worker(void *arg) {
  uint64_t seed = (uint64_t)(size_t)arg;
  unsigned tag = (unsigned)seed;
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, seed % 2 ? cudaStreamNonBlocking : cudaStreamDefault));
  void *live[LIVE] = {0};
  size_t size[LIVE] = {0};
  for (int r = 0; r < ROUNDS; r++) {
    int k = (int)(next_random(&seed) % LIVE);
    if (live[k]) {
      unsigned char probe[2];
      CUDA_OK(cudaMemcpy(probe, live[k], 1, cudaMemcpyDeviceToHost));
      CUDA_OK(cudaMemcpy(probe + 1, (char *)live[k] + size[k] - 1, 1, cudaMemcpyDeviceToHost));
      CHECK(probe[0] == (unsigned char)(tag + (unsigned)k) && probe[1] == probe[0]);
      CUDA_OK(r % 2 ? cudaFree(live[k]) : cudaFreeAsync(live[k], s));
      live[k] = NULL;
    } else {
      size[k] = 1 + next_random(&seed) % (r % 4 < 2 ? 8u << 10 : 4u << 20);   /* half small: the front cache's */
      CUDA_OK(r % 3 ? cudaMalloc(&live[k], size[k]) : cudaMallocAsync(&live[k], size[k], s));
      CUDA_OK(cudaMemsetAsync(live[k], (int)(tag + (unsigned)k) & 0xff, size[k], s));
      CUDA_OK(cudaStreamSynchronize(s));
    }
  }
  for (int k = 0; k < LIVE; k++)
    if (live[k]) CUDA_OK(cudaFree(live[k]));
  CUDA_OK(cudaStreamDestroy(s));
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(size_t)(i * 1000 + 1)) == 0);
  for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) CHECK(st.num_live_blocks.current == 0);
  printf("threads: ok\n");
  return 0;
}
