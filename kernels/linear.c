/* Linear layer (matmul + bias), C reference. Rows are processed four at a
 * time so that each weight row is read once per block of rows: it keeps the
 * reference fast enough to train the workload on two CPU cores. */
#include <assert.h>
#include <string.h>

#include "ops.h"

/* out[r] = bias + x_r . w for four rows at once. */
static void dot4(float *out, size_t stride_out, const float *x, size_t stride_x,
                 const float *w, float bias, int C) {
  float a0 = bias, a1 = bias, a2 = bias, a3 = bias;
  for (int c = 0; c < C; c++) {
    float wc = w[c];
    a0 += x[c] * wc;
    a1 += x[stride_x + c] * wc;
    a2 += x[2 * stride_x + c] * wc;
    a3 += x[3 * stride_x + c] * wc;
  }
  out[0] = a0;
  out[stride_out] = a1;
  out[2 * stride_out] = a2;
  out[3 * stride_out] = a3;
}

void linear_forward_ref(float *out, const float *inp, const float *weight, const float *bias,
                        int N, int C, int OC, cudaStream_t s) {
  (void)s;
  assert(N > 0 && C > 0 && OC > 0);
  int n = 0;
  for (; n + 4 <= N; n += 4)
    for (int o = 0; o < OC; o++)
      dot4(out + (size_t)n * OC + o, (size_t)OC, inp + (size_t)n * C, (size_t)C,
           weight + (size_t)o * C, bias ? bias[o] : 0.0f, C);
  for (; n < N; n++)
    for (int o = 0; o < OC; o++) {
      const float *x = inp + (size_t)n * C, *w = weight + (size_t)o * C;
      float acc = bias ? bias[o] : 0.0f;
      for (int c = 0; c < C; c++) acc += x[c] * w[c];
      out[(size_t)n * OC + o] = acc;
    }
}

/* y[0..C) += a[0] x_0 + a[1] x_1 + a[2] x_2 + a[3] x_3, rows of x `stride`
 * apart: y is loaded and stored once for four rows. */
static void axpy4(float *restrict y, const float *a, const float *restrict x, size_t stride,
                  int C) {
  const float *x0 = x, *x1 = x + stride, *x2 = x + 2 * stride, *x3 = x + 3 * stride;
  for (int c = 0; c < C; c++) y[c] += a[0] * x0[c] + a[1] * x1[c] + a[2] * x2[c] + a[3] * x3[c];
}

static void axpy(float *restrict y, float a, const float *restrict x, int C) {
  for (int c = 0; c < C; c++) y[c] += a * x[c];
}

/* dinp (N,C) = dout (N,OC) . weight (OC,C) */
static void backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                           int OC) {
  for (int n = 0; n < N; n++) {
    const float *g = dout + (size_t)n * OC;
    float *dx = dinp + (size_t)n * C;
    memset(dx, 0, (size_t)C * sizeof(float));
    int o = 0;
    for (; o + 4 <= OC; o += 4) axpy4(dx, g + o, weight + (size_t)o * C, (size_t)C, C);
    for (; o < OC; o++) axpy(dx, g[o], weight + (size_t)o * C, C);
  }
}

/* dweight (OC,C) += dout^T . inp, four input rows at a time */
static void backward_weight(float *dweight, const float *dout, const float *inp, int N, int C,
                            int OC) {
  int n = 0;
  for (; n + 4 <= N; n += 4)
    for (int o = 0; o < OC; o++) {
      const float *g = dout + (size_t)n * OC + o;
      float a[4] = {g[0], g[OC], g[2 * (size_t)OC], g[3 * (size_t)OC]};
      axpy4(dweight + (size_t)o * C, a, inp + (size_t)n * C, (size_t)C, C);
    }
  for (; n < N; n++)
    for (int o = 0; o < OC; o++)
      axpy(dweight + (size_t)o * C, dout[(size_t)n * OC + o], inp + (size_t)n * C, C);
}

void linear_backward_ref(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC,
                         cudaStream_t s) {
  (void)s;
  assert(N > 0 && C > 0 && OC > 0 && dweight);
  if (dinp) backward_input(dinp, dout, weight, N, C, OC);
  backward_weight(dweight, dout, inp, N, C, OC);
  if (dbias)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) dbias[o] += dout[(size_t)n * OC + o];
}
