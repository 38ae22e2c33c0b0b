/* Layer normalization, CUDA. One warp per row for the row statistics and
 * the input gradient; one thread per channel for the parameter gradients,
 * so that they are summed in a fixed order (no atomics). */
#include <assert.h>

#include "cuda_check.h"
#include "ops.h"
#include "warp.cuh"

#define LAYERNORM_EPS 1e-5f

// ----------------------------------------------------------------------------
// kernels

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int N, int C) {
  int n = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (n >= N) return;
  const float *x = inp + (size_t)n * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += WARP_SIZE) sum += x[c];
  float m = warp_sum(sum) / C;
  float var = 0.0f;
  for (int c = lane; c < C; c += WARP_SIZE) var += (x[c] - m) * (x[c] - m);
  float r = rsqrtf(warp_sum(var) / C + LAYERNORM_EPS);
  float *y = out + (size_t)n * C;
  for (int c = lane; c < C; c += WARP_SIZE) y[c] = (x[c] - m) * r * weight[c] + bias[c];
  if (lane == 0) {
    mean[n] = m;
    rstd[n] = r;
  }
}

__global__ void layernorm_dinp_kernel(float *dinp, const float *dout, const float *inp,
                                      const float *weight, const float *mean, const float *rstd,
                                      int N, int C) {
  int n = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (n >= N) return;
  const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
  float m = mean[n], r = rstd[n], a = 0.0f, b = 0.0f;
  for (int c = lane; c < C; c += WARP_SIZE) {
    float dnorm = g[c] * weight[c];
    a += dnorm;
    b += dnorm * (x[c] - m) * r;
  }
  float dnorm_mean = warp_sum(a) / C, dnorm_norm_mean = warp_sum(b) / C;
  float *dx = dinp + (size_t)n * C;
  for (int c = lane; c < C; c += WARP_SIZE) {
    float norm = (x[c] - m) * r;
    dx[c] = (g[c] * weight[c] - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

__global__ void layernorm_dparams_kernel(float *dweight, float *dbias, const float *dout,
                                         const float *inp, const float *mean, const float *rstd,
                                         int N, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int n = 0; n < N; n++) {
    float g = dout[(size_t)n * C + c];
    db += g;
    dw += g * (inp[(size_t)n * C + c] - mean[n]) * rstd[n];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

// ----------------------------------------------------------------------------
// launchers

void layernorm_forward_cuda(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C,
                            cudaStream_t s) {
  assert(N > 0 && C > 0);
  layernorm_forward_kernel<<<ROW_GRID(N), ROW_BLOCK, 0, s>>>(out, mean, rstd, inp, weight, bias,
                                                             N, C);
  cuda_check(cudaGetLastError());
}

void layernorm_backward_cuda(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C, cudaStream_t s) {
  assert(N > 0 && C > 0);
  layernorm_dinp_kernel<<<ROW_GRID(N), ROW_BLOCK, 0, s>>>(dinp, dout, inp, weight, mean, rstd,
                                                          N, C);
  cuda_check(cudaGetLastError());
  layernorm_dparams_kernel<<<CEIL_DIV(C, KERNEL_BLOCK), KERNEL_BLOCK, 0, s>>>(
      dweight, dbias, dout, inp, mean, rstd, N, C);
  cuda_check(cudaGetLastError());
}
