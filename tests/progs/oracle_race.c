/* A program with a race the reuse oracle must see (simulated device only:
 * on a GPU the copy would read what the fill has not written yet): a fill
 * on a non-blocking stream, then a synchronous copy of the same bytes
 * without waiting for that stream. Then the same copy after the wait,
 * which is fine. tests/test_sim_preload.c checks the oracle's one report. */
#include "progs.h"

enum { SIZE = 64 * 1024 };

int main(void) {
  cudaStream_t s;
  void *p;
  static unsigned char back[SIZE];
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc(&p, SIZE));
  CUDA_OK(cudaMemsetAsync(p, 7, SIZE, s));
  CUDA_OK(cudaMemcpy(back, p, SIZE, cudaMemcpyDeviceToHost)); /* the race */
  fprintf(stderr, "oracle_race: raced\n");
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(back, p, SIZE, cudaMemcpyDeviceToHost));
  CHECK(back[0] == 7 && back[SIZE - 1] == 7);
  CUDA_OK(cudaFree(p));
  CUDA_OK(cudaStreamDestroy(s));
  printf("oracle_race: ok\n");
  return 0;
}
