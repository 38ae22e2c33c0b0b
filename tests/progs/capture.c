/* Graph capture: while a stream captures, nothing may synchronize, and
 * allocation on the capturing stream belongs to the driver (a graph memory
 * node). Simulated device only, run with
 *   CUDALLOC_CONF=backend:sim,sim_capacity_mb:64,sim_events:manual
 * so that freed memory stays pending until something waits for the device:
 * during the capture an allocation that needs it fails instead of waiting;
 * after the capture the same allocation waits and succeeds. */
#include "progs.h"

#define MiB ((size_t)1 << 20)

int main(void) {
  if (!on_simulated_device()) {
    printf("capture: skipped (needs the simulated device's manual events)\n");
    return 0;
  }
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  void *a = NULL, *b = NULL, *c = NULL;
  CUDA_OK(cudaMalloc(&a, 48 * MiB));
  CUDA_OK(cudaFree(a));   /* pending until the device's earlier work completes */

  CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  CUDA_EXPECT(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaErrorIllegalState);
  /* it would have to wait for the pending free: it must not, during a capture */
  CUDA_EXPECT(cudaMalloc(&b, 48 * MiB), cudaErrorMemoryAllocation);
  CUDA_EXPECT(cudaGetLastError(), cudaErrorMemoryAllocation);
  /* small allocations do not need to wait */
  CUDA_OK(cudaMalloc(&c, 1 * MiB));
  CUDA_OK(cudaFree(c));
  /* a graph memory node: the real driver's job, which the simulation has not */
  CUDA_EXPECT(cudaMallocAsync(&c, MiB, s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = (cudaGraph_t)0x1;
  CUDA_OK(cudaStreamEndCapture(s, &graph));
  CHECK(graph == NULL);
  CUDA_EXPECT(cudaStreamEndCapture(s, &graph), cudaErrorIllegalState);

  CUDA_OK(cudaMalloc(&b, 48 * MiB));   /* now it may wait */
  CUDA_OK(cudaFree(b));
  CUDA_OK(cudaStreamDestroy(s));
  cudalloc_stats_t st;
  if (cudalloc_stats_of(-1, &st)) CHECK(st.num_ooms.total >= 1 && st.num_live_blocks.current == 0);
  printf("capture: ok\n");
  return 0;
}
