/* build/gpu/workload-cuda-pool: build/workload-cuda on the driver's own
 * pool, the design's other yardstick ("no slower than cudaMallocAsync").
 * Linked from the same objects as workload-cuda with
 * --wrap=cudaMalloc --wrap=cudaFree (bench/gpu/gpu.mk), so the workload's
 * cudaMalloc/cudaFree become cudaMallocAsync/cudaFreeAsync on the legacy
 * stream, where its kernels run; nothing else of the program changes.
 *
 * The device's default pool keeps what is freed (release threshold set to
 * the maximum, as PyTorch's cudaMallocAsync backend does): with the default
 * threshold of 0 it would give memory back at every synchronization and
 * measure the driver's allocation cost instead of its pool. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>

static void keep_freed_memory(void) {
  static int done;
  cudaMemPool_t pool;
  int dev = 0;
  uint64_t threshold = UINT64_MAX;
  if (done) return;
  done = 1;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) != cudaSuccess)
    fprintf(stderr, "workload-cuda-pool: cannot raise the pool's release threshold\n");
}

cudaError_t __wrap_cudaMalloc(void **ptr, size_t bytes);
cudaError_t __wrap_cudaFree(void *ptr);

cudaError_t __wrap_cudaMalloc(void **ptr, size_t bytes) {
  keep_freed_memory();
  return cudaMallocAsync(ptr, bytes, cudaStreamLegacy);
}

cudaError_t __wrap_cudaFree(void *ptr) { return cudaFreeAsync(ptr, cudaStreamLegacy); }
