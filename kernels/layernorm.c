/* Layer normalization over the channels of each row, C reference. */
#include <assert.h>
#include <math.h>

#include "ops.h"

#define LAYERNORM_EPS 1e-5f

void layernorm_forward_ref(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C,
                           cudaStream_t s) {
  (void)s;
  assert(N > 0 && C > 0);
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    float m = 0.0f, v = 0.0f;
    for (int c = 0; c < C; c++) m += x[c];
    m /= (float)C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / sqrtf(v / (float)C + LAYERNORM_EPS);
    float *y = out + (size_t)n * C;
    for (int c = 0; c < C; c++) y[c] = (x[c] - m) * r * weight[c] + bias[c];
    mean[n] = m;
    rstd[n] = r;
  }
}

void layernorm_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C, cudaStream_t s) {
  (void)s;
  assert(N > 0 && C > 0);
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C, *g = dout + (size_t)n * C;
    float m = mean[n], r = rstd[n];
    /* the two row means that the gradient of the normalization needs */
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int c = 0; c < C; c++) {
      float norm = (x[c] - m) * r, dnorm = g[c] * weight[c];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * norm;
    }
    dnorm_mean /= (float)C;
    dnorm_norm_mean /= (float)C;
    float *dx = dinp + (size_t)n * C;
    for (int c = 0; c < C; c++) {
      float norm = (x[c] - m) * r, dnorm = g[c] * weight[c];
      dbias[c] += g[c];
      dweight[c] += norm * g[c];
      dx[c] = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
    }
  }
}
