/* Graph capture in global and thread-local mode, where waiting or querying
 * device work from the capturing thread (from any thread, in global mode)
 * invalidates the capture: cudalloc must then neither poll its fences nor
 * wait. Simulated device only (which enforces the rule as the driver does),
 * run with
 *   CUDALLOC_CONF=backend:sim,sim_capacity_mb:64,sim_events:manual
 * so that a sealed fence stays pending into the capture. */
#include "progs.h"

#include <pthread.h>

#define MiB ((size_t)1 << 20)

static const char *mode_name(enum cudaStreamCaptureMode m) {
  return m == cudaStreamCaptureModeGlobal ? "global" : m == cudaStreamCaptureModeThreadLocal ? "thread-local" : "relaxed";
}

/* A free whose fence is sealed and pending, then a capture in mode during
 * which cudalloc is asked for memory and for free memory: the capture must
 * survive. */
static void allocator_keeps_the_capture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  void *a = NULL, *b = NULL;
  size_t fr, tot;
  CUDA_OK(cudaMalloc(&a, 48 * MiB));
  CUDA_OK(cudaFree(a));
  /* cudalloc_step seals the free's fence without waiting for it: an event,
   * pending (cudaMemGetInfo would wait for it). */
  void (*step)(void);
  *(void **)&step = dlsym(RTLD_DEFAULT, "cudalloc_step");
  CHECK(step != NULL);
  step();
  CUDA_OK(cudaStreamBeginCapture(s, mode));
  CUDA_OK(cudaMemGetInfo(&fr, &tot));
  CUDA_EXPECT(cudaMalloc(&b, 48 * MiB), cudaErrorMemoryAllocation);   /* would have to wait */
  (void)cudaGetLastError();
  cudaGraph_t g;
  cudaError_t e = cudaStreamEndCapture(s, &g);
  if (e != cudaSuccess) {
    fprintf(stderr, "capture_modes: %s capture: cudalloc broke it (%s)\n", mode_name(mode), cudaGetErrorName(e));
    exit(1);
  }
  CUDA_OK(cudaMalloc(&b, 48 * MiB));
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaDeviceSynchronize());
}

/* The rule itself, as the simulated device enforces it. */
static void a_query_breaks_the_capture(cudaStream_t s, cudaEvent_t ev, enum cudaStreamCaptureMode mode) {
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, mode));
  CUDA_EXPECT(cudaEventQuery(ev), cudaErrorStreamCaptureUnsupported);
  CUDA_EXPECT(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
  (void)cudaGetLastError();
}

static pthread_barrier_t step;

static void *thread_local_capture(void *arg) {
  cudaStream_t s = arg;
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  pthread_barrier_wait(&step);   /* the main thread queries now */
  pthread_barrier_wait(&step);
  CUDA_OK(cudaStreamEndCapture(s, &g));
  return NULL;
}

int main(void) {
  if (!on_simulated_device()) {
    printf("capture_modes: skipped (needs the simulated device's manual events)\n");
    return 0;
  }
  cudaStream_t s, s2;
  cudaEvent_t ev;
  cudaGraph_t g;
  CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreate(&ev));

  allocator_keeps_the_capture(s, cudaStreamCaptureModeGlobal);
  allocator_keeps_the_capture(s, cudaStreamCaptureModeThreadLocal);

  CUDA_OK(cudaEventRecord(ev, s2));   /* pending until synchronized */
  a_query_breaks_the_capture(s, ev, cudaStreamCaptureModeGlobal);
  a_query_breaks_the_capture(s, ev, cudaStreamCaptureModeThreadLocal);
  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  CUDA_EXPECT(cudaEventQuery(ev), cudaErrorNotReady);   /* relaxed: allowed */
  CUDA_OK(cudaStreamEndCapture(s, &g));
  /* another thread's thread-local capture does not concern this one */
  pthread_t t;
  pthread_barrier_init(&step, NULL, 2);
  CHECK(pthread_create(&t, NULL, thread_local_capture, s) == 0);
  pthread_barrier_wait(&step);
  CUDA_EXPECT(cudaEventQuery(ev), cudaErrorNotReady);
  pthread_barrier_wait(&step);
  pthread_join(t, NULL);

  CUDA_OK(cudaEventSynchronize(ev));
  CUDA_OK(cudaEventDestroy(ev));
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaStreamDestroy(s2));
  printf("capture_modes: ok\n");
  return 0;
}
