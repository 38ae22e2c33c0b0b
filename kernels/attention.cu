/* Causal multi-head self-attention, CUDA. The same layout and arithmetic as
 * attention.c. One warp per query row in the forward pass and for dq; one
 * warp per key row for dk and dv, so that no gradient needs an atomic. */
#include <assert.h>
#include <math.h>

#include "cuda_check.h"
#include "ops.h"
#include "warp.cuh"

// ----------------------------------------------------------------------------
// kernels

/* Row (b, h, t): probabilities att[b,h,t,:] and out[b,t,h*hs : (h+1)*hs]. */
__global__ void attention_forward_kernel(float *out, float *att, const float *qkv, int B,
                                         int T, int C, int NH) {
  int row = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (row >= B * NH * T) return;
  int t = row % T, h = (row / T) % NH, b = row / (T * NH), hs = C / NH;
  size_t stride = 3 * (size_t)C;
  const float *base = qkv + (size_t)b * T * stride + (size_t)h * hs;
  const float *q = base + t * stride;
  float *p = att + (size_t)row * T, scale = rsqrtf((float)hs), maxv = -INFINITY;
  for (int j = lane; j <= t; j += WARP_SIZE) {
    const float *k = base + j * stride + C;
    float acc = 0.0f;
    for (int d = 0; d < hs; d++) acc += q[d] * k[d];
    p[j] = acc * scale;
    maxv = fmaxf(maxv, p[j]);
  }
  maxv = warp_max(maxv);
  float sum = 0.0f;
  for (int j = lane; j <= t; j += WARP_SIZE) {
    p[j] = expf(p[j] - maxv);
    sum += p[j];
  }
  float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j < T; j += WARP_SIZE) p[j] = j <= t ? p[j] * inv : 0.0f;
  __syncwarp(); /* every lane reads the whole row below */
  float *y = out + ((size_t)b * T + t) * C + (size_t)h * hs;
  for (int d = lane; d < hs; d += WARP_SIZE) {
    float acc = 0.0f;
    for (int j = 0; j <= t; j++) acc += p[j] * base[j * stride + 2 * C + d];
    y[d] = acc;
  }
}

/* Query row (b, h, t): datt[b,h,t,:] = gradient of the scaled scores, and dq. */
__global__ void attention_dq_kernel(float *dqkv, float *datt, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH) {
  int row = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (row >= B * NH * T) return;
  int t = row % T, h = (row / T) % NH, b = row / (T * NH), hs = C / NH;
  size_t stride = 3 * (size_t)C;
  const float *base = qkv + (size_t)b * T * stride + (size_t)h * hs;
  const float *p = att + (size_t)row * T, *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
  float *dp = datt + (size_t)row * T, scale = rsqrtf((float)hs), sum = 0.0f;
  for (int j = lane; j <= t; j += WARP_SIZE) {
    const float *v = base + j * stride + 2 * C;
    float acc = 0.0f;
    for (int d = 0; d < hs; d++) acc += dy[d] * v[d];
    dp[j] = acc;
    sum += p[j] * acc;
  }
  sum = warp_sum(sum);
  for (int j = lane; j < T; j += WARP_SIZE) dp[j] = j <= t ? p[j] * (dp[j] - sum) * scale : 0.0f;
  __syncwarp();
  float *dq = dqkv + (size_t)b * T * stride + t * stride + (size_t)h * hs;
  for (int d = lane; d < hs; d += WARP_SIZE) {
    float acc = 0.0f;
    for (int j = 0; j <= t; j++) acc += dp[j] * base[j * stride + C + d];
    dq[d] = acc;
  }
}

/* Key row (b, h, j): dk and dv, summed over the queries t >= j that see it. */
__global__ void attention_dkv_kernel(float *dqkv, const float *datt, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C,
                                     int NH) {
  int row = warp_row(), lane = threadIdx.x % WARP_SIZE;
  if (row >= B * NH * T) return;
  int j = row % T, h = (row / T) % NH, b = row / (T * NH), hs = C / NH;
  size_t stride = 3 * (size_t)C, first = (size_t)(b * NH + h) * T;
  const float *base = qkv + (size_t)b * T * stride + (size_t)h * hs;
  const float *dyb = dout + (size_t)b * T * C + (size_t)h * hs;
  float *dk = dqkv + (size_t)b * T * stride + j * stride + C + (size_t)h * hs;
  for (int d = lane; d < hs; d += WARP_SIZE) {
    float ak = 0.0f, av = 0.0f;
    for (int t = j; t < T; t++) {
      ak += datt[(first + t) * T + j] * base[t * stride + d];
      av += att[(first + t) * T + j] * dyb[(size_t)t * C + d];
    }
    dk[d] = ak;
    dk[C + d] = av;
  }
}

// ----------------------------------------------------------------------------
// launchers

static void check_shape(int B, int T, int C, int NH) {
  assert(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0);
  (void)B, (void)T, (void)C, (void)NH;
}

void attention_forward_cuda(float *out, float *att, const float *qkv, int B, int T, int C,
                            int NH, cudaStream_t s) {
  check_shape(B, T, C, NH);
  attention_forward_kernel<<<ROW_GRID(B * NH * T), ROW_BLOCK, 0, s>>>(out, att, qkv, B, T, C, NH);
  cuda_check(cudaGetLastError());
}

void attention_backward_cuda(float *dqkv, float *datt, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH, cudaStream_t s) {
  check_shape(B, T, C, NH);
  unsigned grid = ROW_GRID(B * NH * T);
  attention_dq_kernel<<<grid, ROW_BLOCK, 0, s>>>(dqkv, datt, dout, qkv, att, B, T, C, NH);
  cuda_check(cudaGetLastError());
  attention_dkv_kernel<<<grid, ROW_BLOCK, 0, s>>>(dqkv, datt, dout, qkv, att, B, T, C, NH);
  cuda_check(cudaGetLastError());
}
