/* Softmax and cross-entropy over the vocabulary, CUDA. One warp per row for
 * the forward pass, one thread per logit for the backward pass. */
#include <assert.h>
#include <math.h>

#include "cuda_check.h"
#include "ops.h"
#include "warp.cuh"

// ----------------------------------------------------------------------------
// kernels

__global__ void crossentropy_forward_kernel(float *losses, float *probs, const float *logits,
                                            const int *targets, int N, int V) {
  int n = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (n >= N) return;
  const float *z = logits + (size_t)n * V;
  float *p = probs + (size_t)n * V, maxv = -INFINITY, sum = 0.0f;
  for (int v = lane; v < V; v += WARP_SIZE) maxv = fmaxf(maxv, z[v]);
  maxv = warp_max(maxv);
  for (int v = lane; v < V; v += WARP_SIZE) sum += expf(z[v] - maxv);
  sum = warp_sum(sum);
  for (int v = lane; v < V; v += WARP_SIZE) p[v] = expf(z[v] - maxv) / sum;
  int t = targets[n];
  if (lane == 0) losses[n] = (t >= 0 && t < V) ? maxv + logf(sum) - z[t] : 0.0f;
}

__global__ void crossentropy_backward_kernel(float *dlogits, const float *probs,
                                             const int *targets, float scale, int N, int V) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= (size_t)N * V) return;
  int t = targets[i / V], v = (int)(i % V);
  dlogits[i] = t >= 0 ? (probs[i] - (v == t ? 1.0f : 0.0f)) * scale : 0.0f;
}

// ----------------------------------------------------------------------------
// launchers

void crossentropy_forward_cuda(float *losses, float *probs, const float *logits,
                               const int *targets, int N, int V, cudaStream_t s) {
  assert(N > 0 && V > 0);
  crossentropy_forward_kernel<<<ROW_GRID(N), ROW_BLOCK, 0, s>>>(losses, probs, logits, targets,
                                                                N, V);
  cuda_check(cudaGetLastError());
}

void crossentropy_backward_cuda(float *dlogits, const float *probs, const int *targets,
                                float scale, int N, int V, cudaStream_t s) {
  assert(N > 0 && V > 0);
  unsigned grid = (unsigned)CEIL_DIV((size_t)N * V, (size_t)KERNEL_BLOCK);
  crossentropy_backward_kernel<<<grid, KERNEL_BLOCK, 0, s>>>(dlogits, probs, targets, scale, N,
                                                             V);
  cuda_check(cudaGetLastError());
}
