/* A training loop that knows nothing of cudalloc: each step allocates
 * activations of a variable length, frees them, and synchronizes the
 * device, as C training loops do; with "leak" it also keeps one 64 KiB
 * buffer per step from one helper (keep_history), a leak of the kind that
 * only shows as a curve. The creep report must name that helper, with
 * step_on:sync and with sample_ms, and flag nothing without the leak.
 *   creep_leak leak|clean [steps (30)] [sleep per step, us (0)]
 * Linked with -rdynamic, so that its helpers have names without debug
 * information. */
#include "progs.h"

#include <unistd.h>

#define KEPT_BYTES (64 * 1024)

/* The leak's one call site. */
__attribute__((noinline)) void *keep_history(size_t n) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, n));
  CUDA_OK(cudaMemset(p, 0, n));
  return p;
}

__attribute__((noinline)) void *activation(size_t n) {
  void *p = NULL;
  CUDA_OK(cudaMalloc(&p, n));
  CUDA_OK(cudaMemset(p, 1, n));
  return p;
}

int main(int argc, char **argv) {
  int leak = argc > 1 && strcmp(argv[1], "leak") == 0;
  int steps = argc > 2 ? atoi(argv[2]) : 30;
  int sleep_us = argc > 3 ? atoi(argv[3]) : 0;
  CHECK(steps > 0 && sleep_us >= 0);
  void *weights = activation(4 << 20);
  unsigned seed = 12345;
  for (int s = 0; s < steps; s++) {
    seed = seed * 1103515245u + 12345u;   /* a batch of another length every step */
    size_t len = (256 << 10) + (seed >> 8) % (2 << 20);
    void *x = activation(len), *y = activation(2 * len);
    if (leak) keep_history(KEPT_BYTES);
    CUDA_OK(cudaFree(y));
    CUDA_OK(cudaFree(x));
    CUDA_OK(cudaDeviceSynchronize());
    if (sleep_us) usleep((useconds_t)sleep_us);
  }
  CUDA_OK(cudaFree(weights));
  printf("creep_leak: ok\n");
  return 0;
}
