/* The preload on a real GPU, with kernels: built by nvcc twice (shim/shim.mk),
 * with nvcc's default static cudart and with -cudart shared, and run by
 * bench/gpu-check.sh under LD_PRELOAD=libcudalloc.so. Allocations of every
 * kind (synchronous, stream-ordered on two streams, pitched) feed kernels
 * whose results are checked exactly; the blocks are freed and reused round
 * after round. At the end cudalloc's own counters (found through dlsym)
 * must show that it served them: with static cudart that can only be
 * through the driver entry points it hands out via dlsym and
 * cuGetProcAddress. */
#include "progs.h"

#include <cuda_runtime.h>

enum { ROUNDS = 40, STREAMS = 2 };

__global__ void fill(float *x, size_t n, float base) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = base + (float)(i % 1024);
}

__global__ void saxpy(float a, const float *x, float *y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

/* y = 2x + y with x = i%1024 and y = 1 + i%1024: exact in float. */
static void check(const float *y, size_t n) {
  for (size_t i = 0; i < n; i++) CHECK(y[i] == 3.0f * (float)(i % 1024) + 1.0f);
}

static size_t size_of_round(int r) { return ((size_t)1 << (10 + r % 12)) + (size_t)r * 4096; }

static void synchronous_rounds(float *host) {
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = size_of_round(r);
    float *x = NULL, *y = NULL;
    CUDA_OK(cudaMalloc((void **)&x, n * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&y, n * sizeof(float)));
    fill<<<128, 256>>>(x, n, 0.0f);
    fill<<<128, 256>>>(y, n, 1.0f);
    saxpy<<<128, 256>>>(2.0f, x, y, n);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(host, y, n * sizeof(float), cudaMemcpyDeviceToHost));
    check(host, n);
    CUDA_OK(cudaFree(x));
    CUDA_OK(cudaFree(y));
  }
}

static void stream_ordered_rounds(float *host) {
  cudaStream_t s[STREAMS];
  CUDA_OK(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreate(&s[1]));
  for (int r = 0; r < ROUNDS; r++) {
    cudaStream_t st = s[r % STREAMS];
    size_t n = size_of_round(r + 3);
    float *x = NULL, *y = NULL;
    CUDA_OK(cudaMallocAsync((void **)&x, n * sizeof(float), st));
    CUDA_OK(cudaMallocAsync((void **)&y, n * sizeof(float), st));
    fill<<<128, 256, 0, st>>>(x, n, 0.0f);
    fill<<<128, 256, 0, st>>>(y, n, 1.0f);
    saxpy<<<128, 256, 0, st>>>(2.0f, x, y, n);
    CUDA_OK(cudaMemcpyAsync(host, y, n * sizeof(float), cudaMemcpyDeviceToHost, st));
    CUDA_OK(cudaFreeAsync(x, st));
    CUDA_OK(cudaFreeAsync(y, st));
    CUDA_OK(cudaStreamSynchronize(st));
    check(host, n);
  }
  for (int k = 0; k < STREAMS; k++) CUDA_OK(cudaStreamDestroy(s[k]));
}

static void pitched(float *host) {
  size_t pitch = 0, width = 1000 * sizeof(float), rows = 64;
  float *x = NULL;
  CUDA_OK(cudaMallocPitch((void **)&x, &pitch, width, rows));
  CHECK(pitch >= width);
  fill<<<64, 256>>>(x, pitch / sizeof(float) * rows, 1.0f);
  CUDA_OK(cudaMemcpy2D(host, width, x, pitch, width, rows, cudaMemcpyDeviceToHost));
  CHECK(host[0] == 1.0f && host[999] == 1.0f + (float)(999 % 1024));
  CUDA_OK(cudaFree(x));
}

/* The driver entry point the runtime hands out is cudalloc's. */
static void driver_entry_point(void) {
  void *fn = NULL;
  cudaDriverEntryPointQueryResult status;
  CUDA_OK(cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &status));
  CHECK(status == cudaDriverEntryPointSuccess && served_by_cudalloc(fn));
}

int main(void) {
  Dl_info info;
  int shared = dladdr((void *)&cudaGetErrorString, &info) && strstr(info.dli_fname, "libcudart");
  printf("gpu_saxpy: CUDA runtime linked %s\n", shared ? "shared (libcudart.so)" : "statically (nvcc's default)");
  float *host = (float *)malloc((((size_t)1 << 21) + (ROUNDS + 3) * (size_t)4096) * sizeof(float));
  CHECK(host != NULL);
  size_t free0, total, free1;
  CUDA_OK(cudaMemGetInfo(&free0, &total));
  synchronous_rounds(host);
  stream_ordered_rounds(host);
  pitched(host);
  driver_entry_point();
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemGetInfo(&free1, &total));
  CHECK(free1 <= total);

  cudalloc_stats_t st;
  CHECK(cudalloc_stats_of(-1, &st));   /* run it preloaded */
  CHECK(st.num_allocs.total >= 4 * ROUNDS + 1);
  CHECK(st.num_live_blocks.current == 0);
  printf("gpu_saxpy: served by cudalloc: %lld allocations, peak reserved %.1f MiB, %lld driver allocations\n",
         (long long)st.num_allocs.total, (double)st.reserved_bytes.peak / (1 << 20),
         (long long)st.backend_create.total);
  free(host);
  printf("gpu_saxpy: ok\n");
  return 0;
}
