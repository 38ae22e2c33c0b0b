/* A plain training loop on the legacy stream alone (simulated device:
 * the fills are its kernels): every step cudaMallocs activations, fills
 * them asynchronously and cudaFrees them while the fills may still run,
 * with no synchronization, so that only the legacy queue makes the frees
 * reusable. It prints the event calls of steps 5..19, then creates a
 * non-blocking stream (the shim's cudaStreamCreateWithFlags tells
 * cudalloc, which ends the mode with one synchronization) and prints the
 * synchronizations that took, and the event calls of the same loop after
 * it. tests/test_sim_preload.c reads the figures and the oracle's silence. */
#include "progs.h"

static long long events(void) {
  cudalloc_stats_t s;
  CHECK(cudalloc_stats_of(0, &s));
  return (long long)(s.backend_event_record.total + s.backend_event_query.total);
}

static long long syncs(void) {
  cudalloc_stats_t s;
  CHECK(cudalloc_stats_of(0, &s));
  return (long long)s.backend_sync.total;
}

static void one_step(int step) {
  for (int i = 0; i < 6; i++) {
    void *p;
    size_t n = (size_t)(i + 1) * (3 << 20) + (size_t)step * 4096;
    CUDA_OK(cudaMalloc(&p, n));
    CUDA_OK(cudaMemsetAsync(p, i, n, 0));
    CUDA_OK(cudaFree(p));
  }
}

static long long loop_events(int steps) {
  long long e0 = 0;
  for (int step = 0; step < steps; step++) {
    if (step == 5) e0 = events();
    one_step(step);
  }
  return events() - e0;
}

int main(void) {
  printf("legacy_queue: single-stream event calls %lld\n", loop_events(20));
  long long s0 = syncs();
  cudaStream_t s;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("legacy_queue: synchronizations at the stream's creation %lld\n", syncs() - s0);
  printf("legacy_queue: two-stream event calls %lld\n", loop_events(20));
  CUDA_OK(cudaStreamDestroy(s));
  printf("legacy_queue: ok\n");
  return 0;
}
