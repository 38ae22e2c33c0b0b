/* Linear layer, CUDA: one tiled matrix product with strided operands serves
 * the forward pass and both products of the backward pass. */
#include <assert.h>

#include "cuda_check.h"
#include "ops.h"

#define TILE 16

// ----------------------------------------------------------------------------
// kernels

/* Cm (M,N) = A (M,K) . B (K,N) [+ bias (N)], or += when accumulate. Element
 * A(i,k) is A[i * a_i + k * a_k] and B(k,j) is B[k * b_k + j * b_j], so a
 * transposed operand is only a change of strides. */
__global__ void gemm_kernel(float *Cm, const float *A, const float *B, const float *bias,
                            int M, int N, int K, size_t a_i, size_t a_k, size_t b_k,
                            size_t b_j, int accumulate) {
  __shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
  int ty = threadIdx.y, tx = threadIdx.x;
  int i = blockIdx.y * TILE + ty, j = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tx, kb = k0 + ty;
    As[ty][tx] = (i < M && ka < K) ? A[i * a_i + ka * a_k] : 0.0f;
    Bs[ty][tx] = (kb < K && j < N) ? B[kb * b_k + j * b_j] : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TILE; kk++) acc += As[ty][kk] * Bs[kk][tx];
    __syncthreads();
  }
  if (i >= M || j >= N) return;
  if (bias) acc += bias[j];
  float *c = &Cm[(size_t)i * N + j];
  *c = accumulate ? *c + acc : acc;
}

/* dbias[o] += sum over rows of dout[n, o]; one thread per column, coalesced. */
__global__ void bias_backward_kernel(float *dbias, const float *dout, int N, int OC) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float acc = 0.0f;
  for (int n = 0; n < N; n++) acc += dout[(size_t)n * OC + o];
  dbias[o] += acc;
}

// ----------------------------------------------------------------------------
// launchers

static void gemm(float *Cm, const float *A, const float *B, const float *bias, int M, int N,
                 int K, size_t a_i, size_t a_k, size_t b_k, size_t b_j, int accumulate,
                 cudaStream_t s) {
  dim3 block(TILE, TILE), grid(CEIL_DIV(N, TILE), CEIL_DIV(M, TILE));
  assert(grid.y <= 65535);
  gemm_kernel<<<grid, block, 0, s>>>(Cm, A, B, bias, M, N, K, a_i, a_k, b_k, b_j, accumulate);
  cuda_check(cudaGetLastError());
}

void linear_forward_cuda(float *out, const float *inp, const float *weight, const float *bias,
                         int N, int C, int OC, cudaStream_t s) {
  assert(N > 0 && C > 0 && OC > 0);
  /* out (N,OC) = inp (N,C) . weight^T: B(k,j) = weight[j, k] */
  gemm(out, inp, weight, bias, N, OC, C, C, 1, 1, C, 0, s);
}

void linear_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, int N, int C, int OC,
                          cudaStream_t s) {
  assert(N > 0 && C > 0 && OC > 0 && dweight);
  /* dinp (N,C) = dout (N,OC) . weight (OC,C) */
  if (dinp) gemm(dinp, dout, weight, NULL, N, C, OC, OC, 1, C, 1, 0, s);
  /* dweight (OC,C) += dout^T (OC,N) . inp (N,C): A(i,k) = dout[k, i] */
  gemm(dweight, dout, inp, NULL, OC, C, N, 1, OC, C, 1, 1, s);
  if (dbias) {
    bias_backward_kernel<<<CEIL_DIV(OC, KERNEL_BLOCK), KERNEL_BLOCK, 0, s>>>(dbias, dout, N, OC);
    cuda_check(cudaGetLastError());
  }
}
