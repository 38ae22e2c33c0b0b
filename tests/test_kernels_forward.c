/* Forward C references of kernels/ against what each op must compute:
 * hand-computed values, identities (rows of probabilities sum to 1, a
 * normalized row has mean 0 and variance 1) and double-precision re-
 * computations; AdamW against its closed form over several steps. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "ops.h"

static uint64_t rng = 99;

/* Every buffer of a test, freed by the suite's .fini. */
static void *buffers[16];
static int nbuffers;

static void free_all(void) {
  while (nbuffers) free(buffers[--nbuffers]);
}

static float *randn(size_t n, float scale) {
  float *x = malloc(n * sizeof(float));
  cr_assert(x && nbuffers < 16);
  buffers[nbuffers++] = x;
  for (size_t i = 0; i < n; i++) x[i] = scale * data_normal(&rng);
  return x;
}

TestSuite(kernels_forward, .fini = free_all);

Test(kernels_forward, embedding_copies_rows) {
  float table[4 * 3] = {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}, out[5 * 3];
  int ids[5] = {2, 0, 3, 3, 1};
  embedding_forward_ref(out, ids, table, 5, 4, 3, 0);
  for (int n = 0; n < 5; n++)
    for (int c = 0; c < 3; c++) cr_expect_eq(out[n * 3 + c], table[ids[n] * 3 + c]);
}

/* Odd sizes: the 4-row blocks, their tail, and no bias. */
Test(kernels_forward, linear_matches_double_matmul) {
  int N = 11, C = 9, OC = 6;
  float *x = randn((size_t)N * C, 1.0f), *w = randn((size_t)OC * C, 1.0f), *b = randn(OC, 1.0f);
  float out[11 * 6], nob[11 * 6];
  linear_forward_ref(out, x, w, b, N, C, OC, 0);
  linear_forward_ref(nob, x, w, NULL, N, C, OC, 0);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double acc = 0.0;
      for (int c = 0; c < C; c++) acc += (double)x[n * C + c] * w[o * C + c];
      cr_expect_float_eq(nob[n * OC + o], acc, 1e-4, "out[%d,%d]", n, o);
      cr_expect_float_eq(out[n * OC + o], acc + b[o], 1e-4, "out[%d,%d] with bias", n, o);
    }
}

Test(kernels_forward, layernorm_normalizes_rows) {
  int N = 6, C = 32;
  float *x = randn((size_t)N * C, 3.0f), w[32], b[32], out[6 * 32], mean[6], rstd[6];
  for (int c = 0; c < C; c++) w[c] = 1.0f, b[c] = 0.0f;
  for (int c = 0; c < C; c++) x[c] += 100.0f; /* a far-off mean changes nothing */
  layernorm_forward_ref(out, mean, rstd, x, w, b, N, C, 0);
  for (int n = 0; n < N; n++) {
    double m = 0.0, v = 0.0, xm = 0.0;
    for (int c = 0; c < C; c++) m += out[n * C + c], xm += x[n * C + c];
    m /= C;
    for (int c = 0; c < C; c++) v += (out[n * C + c] - m) * (out[n * C + c] - m);
    cr_expect_float_eq(m, 0.0, 1e-5, "row %d mean", n);
    cr_expect_float_eq(v / C, 1.0, 1e-3, "row %d variance", n);
    cr_expect_float_eq(mean[n], xm / C, 1e-3, "row %d stored mean", n);
  }
  /* weight and bias scale and shift */
  for (int c = 0; c < C; c++) w[c] = 2.0f, b[c] = 0.5f;
  float out2[6 * 32];
  layernorm_forward_ref(out2, mean, rstd, x, w, b, N, C, 0);
  for (int i = 0; i < N * C; i++) cr_expect_float_eq(out2[i], 2.0f * out[i] + 0.5f, 1e-5);
}

Test(kernels_forward, attention_is_causal_and_normalized) {
  int B = 2, T = 7, C = 8, NH = 2, hs = 4;
  float *qkv = randn((size_t)B * T * 3 * C, 1.0f);
  float out[2 * 7 * 8], att[2 * 2 * 7 * 7];
  attention_forward_ref(out, att, qkv, B, T, C, NH, 0);
  for (int r = 0; r < B * NH * T; r++) {
    int t = r % T;
    double sum = 0.0;
    for (int j = 0; j < T; j++) {
      float p = att[r * T + j];
      if (j > t) cr_expect_eq(p, 0.0f, "row %d sees the future at %d", r, j);
      sum += p;
    }
    cr_expect_float_eq(sum, 1.0, 1e-5, "row %d sums to %f", r, sum);
  }
  /* position 0 sees only itself: its output is its own value */
  for (int b = 0; b < B; b++)
    for (int c = 0; c < C; c++)
      cr_expect_float_eq(out[b * T * C + c], qkv[b * T * 3 * C + 2 * C + c], 1e-6);
  /* equal keys: uniform attention, the output is the mean of the values seen */
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) qkv[t * 3 * C + C + c] = 0.3f;
  attention_forward_ref(out, att, qkv, B, T, C, NH, 0);
  for (int t = 0; t < T; t++)
    for (int c = 0; c < C; c++) {
      double mean = 0.0;
      for (int j = 0; j <= t; j++) mean += qkv[j * 3 * C + 2 * C + c];
      cr_expect_float_eq(out[t * C + c], mean / (t + 1), 1e-5, "t %d c %d (hs %d)", t, c, hs);
    }
}

Test(kernels_forward, gelu_values) {
  float x[5] = {0.0f, 1.0f, -1.0f, 10.0f, -10.0f}, y[5];
  gelu_forward_ref(y, x, 5, 0);
  cr_expect_eq(y[0], 0.0f);
  cr_expect_float_eq(y[1], 0.841192f, 1e-5); /* tanh approximation of GELU(1) */
  cr_expect_float_eq(y[2], -0.158808f, 1e-5);
  cr_expect_float_eq(y[3], 10.0f, 1e-5);
  cr_expect_float_eq(y[4], 0.0f, 1e-5);
}

Test(kernels_forward, residual_adds) {
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, out[3];
  residual_forward_ref(out, a, b, 3, 0);
  for (int i = 0; i < 3; i++) cr_expect_eq(out[i], a[i] + b[i]);
}

Test(kernels_forward, crossentropy_values) {
  int V = 50, targets[3] = {7, -1, 0};
  float logits[3 * 50], losses[3], probs[3 * 50];
  for (int i = 0; i < 3 * V; i++) logits[i] = 0.25f; /* uniform */
  logits[2 * V + 0] = 1000.0f;                       /* certain, without overflow */
  crossentropy_forward_ref(losses, probs, logits, targets, 3, V, 0);
  cr_expect_float_eq(losses[0], logf(50.0f), 1e-5);
  cr_expect_eq(losses[1], 0.0f, "a row without a target has no loss");
  cr_expect_float_eq(losses[2], 0.0f, 1e-6);
  for (int v = 0; v < V; v++) cr_expect_float_eq(probs[v], 1.0f / V, 1e-7);
  cr_expect(isfinite(losses[2]) && isfinite(probs[2 * V + 1]));
}

Test(kernels_forward, seq_scatter_then_gather_round_trips) {
  int B = 3, T = 10, C = 2;
  float seq[3 * 10 * 2] = {0}, back[3 * 4 * 2];
  float *part = randn((size_t)B * 4 * C, 1.0f);
  seq_scatter_ref(seq, part, B, T, 5, 4, C, 0);
  seq_gather_ref(back, seq, B, T, 5, 4, C, 0);
  cr_expect_arr_eq(back, part, sizeof back);
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      if (t < 5 || t >= 9)
        for (int c = 0; c < C; c++) cr_expect_eq(seq[(b * T + t) * C + c], 0.0f, "row outside");
}

/* AdamW in double, the textbook way. */
static void adamw_double(double *p, const double *g, double *m, double *v, int n,
                         adamw_hparams_t hp) {
  for (int i = 0; i < n; i++) {
    m[i] = hp.beta1 * m[i] + (1 - hp.beta1) * g[i];
    v[i] = hp.beta2 * v[i] + (1 - hp.beta2) * g[i] * g[i];
    double mh = m[i] / (1 - pow(hp.beta1, hp.t)), vh = v[i] / (1 - pow(hp.beta2, hp.t));
    p[i] -= hp.lr * (mh / (sqrt(vh) + hp.eps) + hp.weight_decay * p[i]);
  }
}

Test(kernels_forward, adamw_matches_closed_form) {
  enum { n = 16, steps = 5 };
  float p[n], m[n] = {0}, v[n] = {0}, g[n];
  double pd[n], md[n] = {0}, vd[n] = {0}, gd[n];
  for (int i = 0; i < n; i++) pd[i] = p[i] = data_normal(&rng);
  for (int t = 1; t <= steps; t++) {
    float before[n];
    memcpy(before, p, sizeof p);
    for (int i = 0; i < n; i++) gd[i] = g[i] = data_normal(&rng) * (i + 1);
    adamw_hparams_t hp = {1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, t};
    adamw_update_ref(p, g, m, v, n, hp, 0);
    adamw_double(pd, gd, md, vd, n, hp);
    if (t == 1) /* the first step moves by lr against the gradient's sign, plus the decay */
      for (int i = 0; i < n; i++)
        cr_expect_float_eq(before[i] - p[i], 1e-2 * ((g[i] > 0) - (g[i] < 0) + 0.1 * before[i]),
                           1e-6, "param %d", i);
  }
  for (int i = 0; i < n; i++) {
    cr_expect_float_eq(p[i], pd[i], 1e-5, "param %d", i);
    cr_expect_float_eq(m[i], md[i], 1e-4 * (1 + fabs(md[i])), "m %d", i);
  }
  /* no gradient: only the decay */
  float q = 2.0f, z = 0.0f, mq = 0.0f, vq = 0.0f;
  adamw_hparams_t hp = {0.1f, 0.9f, 0.999f, 1e-8f, 0.5f, 1};
  adamw_update_ref(&q, &z, &mq, &vq, 1, hp, 0);
  cr_expect_float_eq(q, 2.0f - 0.1f * 0.5f * 2.0f, 1e-6);
}
