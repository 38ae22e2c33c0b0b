/* Copies between a modality's part (B,L,C) and its rows of the sequence
 * (B,T,C), CUDA. One thread per element of the part. */
#include <assert.h>

#include "cuda_check.h"
#include "ops.h"

// ----------------------------------------------------------------------------
// kernels

/* Index of part element i in the sequence. */
__device__ inline size_t seq_index(size_t i, int T, int off, int L, int C) {
  size_t per_sample = (size_t)L * C, b = i / per_sample, r = i % per_sample;
  return (b * T + off) * C + r;
}

__global__ void seq_scatter_kernel(float *seq, const float *part, int B, int T, int off, int L,
                                   int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < (size_t)B * L * C) seq[seq_index(i, T, off, L, C)] = part[i];
}

__global__ void seq_gather_kernel(float *part, const float *seq, int B, int T, int off, int L,
                                  int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < (size_t)B * L * C) part[i] = seq[seq_index(i, T, off, L, C)];
}

// ----------------------------------------------------------------------------
// launchers

static unsigned check_slice(int B, int T, int off, int L, int C) {
  assert(B > 0 && T > 0 && C > 0 && L > 0 && off >= 0 && off + L <= T);
  (void)T, (void)off;
  return (unsigned)CEIL_DIV((size_t)B * L * C, (size_t)KERNEL_BLOCK);
}

void seq_scatter_cuda(float *seq, const float *part, int B, int T, int off, int L, int C,
                      cudaStream_t s) {
  unsigned grid = check_slice(B, T, off, L, C);
  seq_scatter_kernel<<<grid, KERNEL_BLOCK, 0, s>>>(seq, part, B, T, off, L, C);
  cuda_check(cudaGetLastError());
}

void seq_gather_cuda(float *part, const float *seq, int B, int T, int off, int L, int C,
                     cudaStream_t s) {
  unsigned grid = check_slice(B, T, off, L, C);
  seq_gather_kernel<<<grid, KERNEL_BLOCK, 0, s>>>(part, seq, B, T, off, L, C);
  cuda_check(cudaGetLastError());
}
