/* Causal multi-head self-attention with softmax, C reference.
 *
 * qkv holds, for every position, the query, key and value of all heads side
 * by side: qkv[b, t] = [q (C) | k (C) | v (C)], head h at offset h * C/NH of
 * each. Position t attends to positions 0..t; the model puts the image and
 * audio first, so every text position sees all of them. */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "ops.h"

static void check_shape(int B, int T, int C, int NH) {
  assert(B > 0 && T > 0 && C > 0 && NH > 0 && C % NH == 0);
  (void)B, (void)T, (void)C, (void)NH;
}

static float dot(const float *a, const float *b, int n) {
  float acc = 0.0f;
  for (int i = 0; i < n; i++) acc += a[i] * b[i];
  return acc;
}

/* y[0..n) += a * x[0..n) */
static void axpy(float *y, float a, const float *x, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* One row of probabilities: softmax of the scaled scores of query q. */
static void softmax_row(float *row, const float *q, const float *keys, size_t stride,
                        int t, int T, int hs) {
  float scale = 1.0f / sqrtf((float)hs), maxv = -INFINITY, sum = 0.0f;
  for (int j = 0; j <= t; j++) {
    row[j] = dot(q, keys + (size_t)j * stride, hs) * scale;
    maxv = fmaxf(maxv, row[j]);
  }
  for (int j = 0; j <= t; j++) {
    row[j] = expf(row[j] - maxv);
    sum += row[j];
  }
  for (int j = 0; j <= t; j++) row[j] /= sum;
  for (int j = t + 1; j < T; j++) row[j] = 0.0f;
}

void attention_forward_ref(float *out, float *att, const float *qkv, int B, int T, int C,
                           int NH, cudaStream_t s) {
  (void)s;
  check_shape(B, T, C, NH);
  int hs = C / NH;
  size_t stride = 3 * (size_t)C;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *base = qkv + (size_t)b * T * stride + (size_t)h * hs;
      for (int t = 0; t < T; t++) {
        float *row = att + (((size_t)b * NH + h) * T + t) * T;
        softmax_row(row, base + t * stride, base + C, stride, t, T, hs);
        float *y = out + ((size_t)b * T + t) * C + (size_t)h * hs;
        memset(y, 0, (size_t)hs * sizeof(float));
        for (int j = 0; j <= t; j++) axpy(y, row[j], base + j * stride + 2 * C, hs);
      }
    }
}

void attention_backward_ref(float *dqkv, float *datt, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH, cudaStream_t s) {
  (void)s;
  check_shape(B, T, C, NH);
  int hs = C / NH;
  size_t stride = 3 * (size_t)C;
  float scale = 1.0f / sqrtf((float)hs);
  memset(dqkv, 0, (size_t)B * T * stride * sizeof(float));
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *base = qkv + (size_t)b * T * stride + (size_t)h * hs;
      float *dbase = dqkv + (size_t)b * T * stride + (size_t)h * hs;
      for (int t = 0; t < T; t++) {
        const float *row = att + (((size_t)b * NH + h) * T + t) * T;
        float *drow = datt + (((size_t)b * NH + h) * T + t) * T;
        const float *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
        /* through the weighted sum of values: dv, and d(probabilities) */
        float sum = 0.0f;
        for (int j = 0; j <= t; j++) {
          drow[j] = dot(dy, base + j * stride + 2 * C, hs);
          sum += row[j] * drow[j];
          axpy(dbase + j * stride + 2 * C, row[j], dy, hs);
        }
        /* through the softmax, then the scaled dot products: dq and dk */
        for (int j = 0; j <= t; j++) {
          drow[j] = row[j] * (drow[j] - sum) * scale;
          axpy(dbase + t * stride, drow[j], base + j * stride + C, hs);
          axpy(dbase + j * stride + C, drow[j], base + t * stride, hs);
        }
        for (int j = t + 1; j < T; j++) drow[j] = 0.0f;
      }
    }
}
