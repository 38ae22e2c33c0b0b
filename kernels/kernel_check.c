/* Every CUDA kernel against its C reference, on random inputs of awkward
 * shapes (not multiples of the tile or warp sizes). An output element passes
 * when |gpu - ref| <= tol + |ref| * eps; the first mismatches of each output
 * are printed. Needs a GPU: compiled in CI, run by bench/gpu-check.sh.
 * Exit status: 0 when every output matches. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "data.h"
#include "ops.h"

#define MAX_PRINTED 10

static int failures;
static uint64_t rng = 42;

static float *host_random(size_t n, float scale) {
  float *h = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) h[i] = scale * data_normal(&rng);
  return h;
}

static void *to_device(const void *h, size_t bytes) {
  void *d;
  cuda_check(cudaMalloc(&d, bytes));
  cuda_check(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
  return d;
}
#define DEV(h, n) to_device((h), (n) * sizeof(*(h)))

/* A host buffer the reference writes into, starting as a copy of init (or zero). */
static float *host_copy(const float *init, size_t n) {
  float *h = calloc(n, sizeof(float));
  if (init) memcpy(h, init, n * sizeof(float));
  return h;
}

static void compare(const char *name, const float *ref, const float *dev, size_t n, float tol,
                    float eps) {
  float *got = malloc(n * sizeof(float));
  cuda_check(cudaDeviceSynchronize());
  cuda_check(cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
  size_t bad = 0;
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - ref[i]);
    worst = err > worst ? err : worst;
    if (!(err <= tol + fabsf(ref[i]) * eps)) {
      if (bad < MAX_PRINTED)
        printf("  mismatch of %s at %zu: ref %.6f, gpu %.6f\n", name, i, ref[i], got[i]);
      bad++;
    }
  }
  printf("%-28s %s (%zu values, max abs error %.2e)\n", name, bad ? "FAIL" : "OK", n, worst);
  failures += bad > 0;
  free(got);
}

static void check_embedding(void) {
  int N = 77, V = 53, C = 40;
  int ids[77];
  for (int n = 0; n < N; n++) ids[n] = (int)(data_rand(&rng) % V);
  float *table = host_random((size_t)V * C, 1.0f), *dout = host_random((size_t)N * C, 1.0f);
  float *dt0 = host_random((size_t)V * C, 0.1f);
  float *out = host_copy(NULL, (size_t)N * C), *dt = host_copy(dt0, (size_t)V * C);
  int *d_ids = DEV(ids, N);
  float *d_table = DEV(table, (size_t)V * C), *d_out = DEV(out, (size_t)N * C);
  float *d_dout = DEV(dout, (size_t)N * C), *d_dt = DEV(dt0, (size_t)V * C);
  embedding_forward_ref(out, ids, table, N, V, C, 0);
  embedding_forward_cuda(d_out, d_ids, d_table, N, V, C, 0);
  compare("embedding_forward", out, d_out, (size_t)N * C, 0.0f, 0.0f);
  embedding_backward_ref(dt, dout, ids, N, V, C, 0);
  embedding_backward_cuda(d_dt, d_dout, d_ids, N, V, C, 0);
  compare("embedding_backward dtable", dt, d_dt, (size_t)V * C, 1e-5f, 1e-5f);
}

static void check_linear(void) {
  int N = 150, C = 72, OC = 100;
  float *inp = host_random((size_t)N * C, 1.0f), *w = host_random((size_t)OC * C, 0.1f);
  float *b = host_random(OC, 0.1f), *dout = host_random((size_t)N * OC, 1.0f);
  float *dw0 = host_random((size_t)OC * C, 0.1f), *db0 = host_random(OC, 0.1f);
  float *out = host_copy(NULL, (size_t)N * OC), *dinp = host_copy(NULL, (size_t)N * C);
  float *dw = host_copy(dw0, (size_t)OC * C), *db = host_copy(db0, OC);
  float *d_inp = DEV(inp, (size_t)N * C), *d_w = DEV(w, (size_t)OC * C), *d_b = DEV(b, OC);
  float *d_out = DEV(out, (size_t)N * OC), *d_dout = DEV(dout, (size_t)N * OC);
  float *d_dinp = DEV(dinp, (size_t)N * C), *d_dw = DEV(dw0, (size_t)OC * C), *d_db = DEV(db0, OC);
  linear_forward_ref(out, inp, w, b, N, C, OC, 0);
  linear_forward_cuda(d_out, d_inp, d_w, d_b, N, C, OC, 0);
  compare("linear_forward", out, d_out, (size_t)N * OC, 1e-4f, 1e-4f);
  linear_backward_ref(dinp, dw, db, dout, inp, w, N, C, OC, 0);
  linear_backward_cuda(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, 0);
  compare("linear_backward dinp", dinp, d_dinp, (size_t)N * C, 1e-4f, 1e-4f);
  compare("linear_backward dweight", dw, d_dw, (size_t)OC * C, 1e-3f, 1e-4f);
  compare("linear_backward dbias", db, d_db, OC, 1e-3f, 1e-4f);
}

static void check_layernorm(void) {
  int N = 130, C = 72;
  float *inp = host_random((size_t)N * C, 2.0f), *w = host_random(C, 1.0f);
  float *b = host_random(C, 1.0f), *dout = host_random((size_t)N * C, 1.0f);
  float *out = host_copy(NULL, (size_t)N * C), *mean = host_copy(NULL, N), *rstd = host_copy(NULL, N);
  float *dinp = host_copy(NULL, (size_t)N * C), *dw = host_copy(NULL, C), *db = host_copy(NULL, C);
  float *d_inp = DEV(inp, (size_t)N * C), *d_w = DEV(w, C), *d_b = DEV(b, C);
  float *d_out = DEV(out, (size_t)N * C), *d_mean = DEV(mean, N), *d_rstd = DEV(rstd, N);
  float *d_dout = DEV(dout, (size_t)N * C), *d_dinp = DEV(dinp, (size_t)N * C);
  float *d_dw = DEV(dw, C), *d_db = DEV(db, C);
  layernorm_forward_ref(out, mean, rstd, inp, w, b, N, C, 0);
  layernorm_forward_cuda(d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C, 0);
  compare("layernorm_forward out", out, d_out, (size_t)N * C, 1e-5f, 1e-4f);
  compare("layernorm_forward mean", mean, d_mean, N, 1e-5f, 1e-4f);
  compare("layernorm_forward rstd", rstd, d_rstd, N, 1e-5f, 1e-4f);
  layernorm_backward_ref(dinp, dw, db, dout, inp, w, mean, rstd, N, C, 0);
  layernorm_backward_cuda(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, d_mean, d_rstd, N, C, 0);
  compare("layernorm_backward dinp", dinp, d_dinp, (size_t)N * C, 1e-4f, 1e-4f);
  compare("layernorm_backward dweight", dw, d_dw, C, 1e-3f, 1e-4f);
  compare("layernorm_backward dbias", db, d_db, C, 1e-3f, 1e-4f);
}

static void check_attention(void) {
  int B = 3, T = 45, C = 48, NH = 4;
  size_t nq = (size_t)B * T * 3 * C, ny = (size_t)B * T * C, na = (size_t)B * NH * T * T;
  float *qkv = host_random(nq, 1.0f), *dout = host_random(ny, 1.0f);
  float *out = host_copy(NULL, ny), *att = host_copy(NULL, na), *dqkv = host_copy(NULL, nq);
  float *datt = host_copy(NULL, na);
  float *d_qkv = DEV(qkv, nq), *d_dout = DEV(dout, ny), *d_out = DEV(out, ny);
  float *d_att = DEV(att, na), *d_dqkv = DEV(dqkv, nq), *d_datt = DEV(datt, na);
  attention_forward_ref(out, att, qkv, B, T, C, NH, 0);
  attention_forward_cuda(d_out, d_att, d_qkv, B, T, C, NH, 0);
  compare("attention_forward out", out, d_out, ny, 1e-5f, 1e-4f);
  compare("attention_forward att", att, d_att, na, 1e-6f, 1e-4f);
  attention_backward_ref(dqkv, datt, dout, qkv, att, B, T, C, NH, 0);
  attention_backward_cuda(d_dqkv, d_datt, d_dout, d_qkv, d_att, B, T, C, NH, 0);
  compare("attention_backward dqkv", dqkv, d_dqkv, nq, 1e-4f, 1e-4f);
}

static void check_elementwise(void) {
  size_t n = 10007;
  float *x = host_random(n, 3.0f), *y = host_random(n, 1.0f), *out = host_copy(NULL, n);
  float *d_x = DEV(x, n), *d_y = DEV(y, n), *d_out = DEV(out, n);
  gelu_forward_ref(out, x, n, 0);
  gelu_forward_cuda(d_out, d_x, n, 0);
  compare("gelu_forward", out, d_out, n, 1e-5f, 1e-5f);
  gelu_backward_ref(out, x, y, n, 0);
  gelu_backward_cuda(d_out, d_x, d_y, n, 0);
  compare("gelu_backward", out, d_out, n, 1e-5f, 1e-4f);
  residual_forward_ref(out, x, y, n, 0);
  residual_forward_cuda(d_out, d_x, d_y, n, 0);
  compare("residual_forward", out, d_out, n, 0.0f, 0.0f);
  float *g = host_random(n, 0.1f), *m = host_random(n, 0.01f), *v = host_copy(NULL, n);
  for (size_t i = 0; i < n; i++) v[i] = g[i] * g[i];
  float *d_g = DEV(g, n), *d_m = DEV(m, n), *d_v = DEV(v, n);
  adamw_hparams_t hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 3};
  adamw_update_ref(x, g, m, v, n, hp, 0);
  adamw_update_cuda(d_x, d_g, d_m, d_v, n, hp, 0);
  compare("adamw params", x, d_x, n, 1e-6f, 1e-5f);
  compare("adamw m", m, d_m, n, 1e-7f, 1e-5f);
  compare("adamw v", v, d_v, n, 1e-8f, 1e-5f);
}

static void check_crossentropy(void) {
  int N = 66, V = 301;
  int targets[66];
  for (int n = 0; n < N; n++) targets[n] = n % 7 == 3 ? -1 : (int)(data_rand(&rng) % V);
  float *logits = host_random((size_t)N * V, 2.0f), *losses = host_copy(NULL, N);
  float *probs = host_copy(NULL, (size_t)N * V), *dlogits = host_copy(NULL, (size_t)N * V);
  int *d_t = DEV(targets, N);
  float *d_logits = DEV(logits, (size_t)N * V), *d_losses = DEV(losses, N);
  float *d_probs = DEV(probs, (size_t)N * V), *d_dlogits = DEV(dlogits, (size_t)N * V);
  crossentropy_forward_ref(losses, probs, logits, targets, N, V, 0);
  crossentropy_forward_cuda(d_losses, d_probs, d_logits, d_t, N, V, 0);
  compare("crossentropy_forward losses", losses, d_losses, N, 1e-5f, 1e-5f);
  compare("crossentropy_forward probs", probs, d_probs, (size_t)N * V, 1e-7f, 1e-4f);
  crossentropy_backward_ref(dlogits, probs, targets, 1.0f / N, N, V, 0);
  crossentropy_backward_cuda(d_dlogits, d_probs, d_t, 1.0f / N, N, V, 0);
  compare("crossentropy_backward", dlogits, d_dlogits, (size_t)N * V, 1e-7f, 1e-4f);
}

static void check_seqslice(void) {
  int B = 3, T = 29, off = 11, L = 13, C = 24;
  size_t ns = (size_t)B * T * C, np = (size_t)B * L * C;
  float *seq = host_random(ns, 1.0f), *part = host_random(np, 1.0f);
  float *d_seq = DEV(seq, ns), *d_part = DEV(part, np);
  seq_scatter_ref(seq, part, B, T, off, L, C, 0);
  seq_scatter_cuda(d_seq, d_part, B, T, off, L, C, 0);
  compare("seq_scatter", seq, d_seq, ns, 0.0f, 0.0f);
  float *seq2 = host_random(ns, 1.0f), *d_seq2 = DEV(seq2, ns);
  seq_gather_ref(part, seq2, B, T, off, L, C, 0);
  seq_gather_cuda(d_part, d_seq2, B, T, off, L, C, 0);
  compare("seq_gather", part, d_part, np, 0.0f, 0.0f);
}

int main(void) {
  int devices = 0;
  cuda_check(cudaGetDeviceCount(&devices));
  struct cudaDeviceProp prop;
  cuda_check(cudaGetDeviceProperties(&prop, 0));
  printf("kernel-check on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  check_embedding();
  check_linear();
  check_layernorm();
  check_attention();
  check_elementwise();
  check_crossentropy();
  check_seqslice();
  printf("kernel-check: %s (%d outputs failed)\n", failures ? "FAIL" : "PASS", failures);
  /* the check is a short-lived program: the buffers go with the process */
  return failures ? 1 : 0;
}
