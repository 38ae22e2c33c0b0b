/* A plain training loop on the legacy stream alone (simulated device:
 * the fills are its kernels): every step cudaMallocs activations, fills
 * them asynchronously and cudaFrees them while the fills may still run,
 * with no synchronization, so that only the legacy queue makes the frees
 * reusable. It prints the event calls of steps 5..19, then creates a
 * non-blocking stream (the shim's cudaStreamCreateWithFlags tells
 * cudalloc, which ends the mode with one synchronization) and prints the
 * synchronizations that took, and the event calls of the same loop after
 * it. "copy": a copy to the host settles the frees before it; "ptds": a
 * per-thread copy ends the mode; "launch": so does a per-thread launch.
 * tests/test_sim_preload.c reads the
 * figures and the oracle's silence. */
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

/* The runtime's per-thread copy, declared by its headers only for programs
 * built with --default-stream per-thread. */
extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;

static long long pending(void) {
  cudalloc_stats_t s;
  CHECK(cudalloc_stats_of(0, &s));
  return (long long)(s.active_bytes.current - s.allocated_bytes.current);
}

/* A copy to the host waits for the legacy stream's earlier work: with no
 * other stream, the frees before it settle with no event. */
static int copy_settles(void) {
  void *q, *p;
  unsigned char back[64];
  CUDA_OK(cudaMalloc(&q, sizeof back));
  CUDA_OK(cudaMemsetAsync(q, 1, sizeof back, 0));
  CUDA_OK(cudaMalloc(&p, 4 << 20));
  CUDA_OK(cudaMemsetAsync(p, 2, 4 << 20, 0));
  CUDA_OK(cudaFree(p));
  long long before = pending(), e0 = events();
  CUDA_OK(cudaMemcpy(back, q, sizeof back, cudaMemcpyDeviceToHost));
  CHECK(back[0] == 1);
  printf("legacy_queue: pending before the copy %lld, after %lld, event calls %lld\n", before, pending(),
         events() - e0);
  CUDA_OK(cudaFree(q));
  printf("legacy_queue: ok\n");
  return 0;
}

/* A copy of a program built for per-thread default streams ends the mode. */
static int per_thread_copy_ends(void) {
  void *q;
  unsigned char back[64];
  CUDA_OK(cudaMalloc(&q, sizeof back));
  long long s0 = syncs();
  CUDA_OK(cudaMemcpy_ptds(back, q, sizeof back, cudaMemcpyDeviceToHost));
  printf("legacy_queue: synchronizations at the per-thread copy %lld\n", syncs() - s0);
  printf("legacy_queue: per-thread event calls %lld\n", loop_events(20));
  CUDA_OK(cudaFree(q));
  printf("legacy_queue: ok\n");
  return 0;
}

/* A kernel launched on the per-thread stream (as a program built with
 * --default-stream per-thread launches every kernel) ends the mode before
 * it is issued. The simulated device runs no kernels: the launch fails,
 * which is not what this checks. */
static void no_kernel(void) {}

static int per_thread_launch_ends(void) {
  long long s0 = syncs();
  void *args[1] = {NULL};
  cudaError_t err = cudaLaunchKernel((const void *)no_kernel, (dim3){1, 1, 1}, (dim3){1, 1, 1}, args, 0,
                                     cudaStreamPerThread);
  (void)cudaGetLastError();
  printf("legacy_queue: launch returned %d, synchronizations at the per-thread launch %lld\n", (int)err,
         syncs() - s0);
  printf("legacy_queue: ok\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "launch") == 0) {
    one_step(0);   /* cudalloc started, the legacy queue in use */
    return per_thread_launch_ends();
  }
  if (argc > 1 && strcmp(argv[1], "copy") == 0) return copy_settles();
  if (argc > 1 && strcmp(argv[1], "ptds") == 0) return per_thread_copy_ends();
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
