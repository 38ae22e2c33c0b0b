/* Embedding lookup, CUDA. One thread per output element. */
#include <assert.h>
#include <math.h>

#include "cuda_check.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// kernels

__global__ void embedding_forward_kernel(float *out, const int *ids, const float *table,
                                         int N, int V, int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= (size_t)N * C) return;
  int id = ids[i / C];
  /* an id outside the table shows up as NaN instead of reading out of bounds */
  out[i] = (id >= 0 && id < V) ? table[(size_t)id * C + i % C] : NAN;
}

__global__ void embedding_backward_kernel(float *dtable, const float *dout, const int *ids,
                                          int N, int V, int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= (size_t)N * C) return;
  int id = ids[i / C];
  if (id >= 0 && id < V) atomicAdd(&dtable[(size_t)id * C + i % C], dout[i]);
}

// ----------------------------------------------------------------------------
// launchers

void embedding_forward_cuda(float *out, const int *ids, const float *table, int N, int V,
                            int C, cudaStream_t s) {
  assert(N > 0 && V > 0 && C > 0);
  unsigned grid = (unsigned)CEIL_DIV((size_t)N * C, (size_t)KERNEL_BLOCK);
  embedding_forward_kernel<<<grid, KERNEL_BLOCK, 0, s>>>(out, ids, table, N, V, C);
  cuda_check(cudaGetLastError());
}

void embedding_backward_cuda(float *dtable, const float *dout, const int *ids, int N, int V,
                             int C, cudaStream_t s) {
  assert(N > 0 && V > 0 && C > 0);
  unsigned grid = (unsigned)CEIL_DIV((size_t)N * C, (size_t)KERNEL_BLOCK);
  embedding_backward_kernel<<<grid, KERNEL_BLOCK, 0, s>>>(dtable, dout, ids, N, V, C);
  cuda_check(cudaGetLastError());
}
