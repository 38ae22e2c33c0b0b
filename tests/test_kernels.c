/* Every backward C reference of kernels/ against central finite differences.
 *
 * For an op y = f(x), the scalar L = sum_i y_i r_i (r fixed and random) has
 * dL/dx = backward(dout = r). Each check perturbs up to FD_SAMPLES inputs by
 * +-h, recomputes L in double, and compares (L+ - L-) / (x+ - x-) with the
 * analytic gradient: |numeric - analytic| <= FD_ABS + FD_REL * |numeric|.
 * The step is divided by the float values actually stored (x+ - x-), and L
 * is summed in double, so that float rounding stays far below the tolerance
 * (FD_VERBOSE=1 prints each check's worst error / tolerance; it is below
 * 0.05 for every op here, see docs/workload.md). The last test breaks a
 * gradient on purpose and shows that the check catches it.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "ops.h"

#define FD_SAMPLES 64
#define FD_H 1e-2f
#define FD_ABS 1e-3
#define FD_REL 1e-2

typedef struct fd_s {
  void (*forward)(void *ctx); /* recomputes out from the inputs held in ctx */
  void *ctx;
  const float *out;
  size_t nout;
  const float *r;             /* L = sum out * r; also the dout of backward */
} fd_t;

static uint64_t rng;
static int fd_quiet; /* the guard test breaks gradients on purpose */

/* Every buffer of a test, freed by the suite's .fini. */
static void *buffers[64];
static int nbuffers;

static float *keep(float *x) {
  cr_assert(x && nbuffers < 64);
  return buffers[nbuffers++] = x;
}

static void free_all(void) {
  while (nbuffers) free(buffers[--nbuffers]);
}

static float *randn(size_t n, float scale) {
  float *x = keep(malloc(n * sizeof(float)));
  for (size_t i = 0; i < n; i++) x[i] = scale * data_normal(&rng);
  return x;
}

static float *zeros(size_t n) { return keep(calloc(n, sizeof(float))); }

static double fd_loss(const fd_t *f) {
  f->forward(f->ctx);
  double L = 0.0;
  for (size_t i = 0; i < f->nout; i++) L += (double)f->out[i] * f->r[i];
  return L;
}

/* Numeric dL/dx[i] by central differences; x[i] is restored. */
static double numeric(const fd_t *f, float *x, size_t i, float h) {
  float x0 = x[i];
  x[i] = x0 + h;
  float xp = x[i];
  double lp = fd_loss(f);
  x[i] = x0 - h;
  float xm = x[i];
  double lm = fd_loss(f);
  x[i] = x0;
  return (lp - lm) / ((double)xp - (double)xm);
}

/* Compares grad with finite differences at up to FD_SAMPLES elements of x;
 * returns the number of mismatches, logging the first few. */
static int fd_check(const fd_t *f, const char *name, float *x, size_t n, const float *grad) {
  uint64_t pick = 0x1234;
  size_t count = n < FD_SAMPLES ? n : FD_SAMPLES;
  int bad = 0;
  double worst = 0.0;
  for (size_t k = 0; k < count; k++) {
    size_t i = n <= FD_SAMPLES ? k : (size_t)(data_rand(&pick) % n);
    double num = numeric(f, x, i, FD_H), tol = FD_ABS + FD_REL * fabs(num);
    double err = fabs(num - grad[i]);
    worst = fmax(worst, err / tol);
    if (err > tol && bad++ < 5 && !fd_quiet)
      cr_log_error("%s[%zu]: analytic %.7g, numeric %.7g", name, i, grad[i], num);
  }
  f->forward(f->ctx);
  if (getenv("FD_VERBOSE")) fprintf(stderr, "fd %-24s worst error/tolerance %.4f\n", name, worst);
  return bad;
}

static void fd_expect(const fd_t *f, const char *name, float *x, size_t n, const float *grad) {
  int bad = fd_check(f, name, x, n, grad);
  cr_expect_eq(bad, 0, "%s: %d gradient elements differ from finite differences", name, bad);
}

/* FD_SEED=n draws other inputs (used to confirm the tolerances' margin). */
static void seed(void) {
  const char *s = getenv("FD_SEED");
  rng = s ? strtoull(s, NULL, 0) : 0xfeedULL;
}

TestSuite(kernels_fd, .init = seed, .fini = free_all);

// ----------------------------------------------------------------------------
// linear

typedef struct linear_ctx_s {
  int N, C, OC;
  float *inp, *w, *b, *out;
} linear_ctx_t;

static void linear_fwd(void *p) {
  linear_ctx_t *c = p;
  linear_forward_ref(c->out, c->inp, c->w, c->b, c->N, c->C, c->OC, 0);
}

Test(kernels_fd, linear) {
  linear_ctx_t c = {7, 13, 10, NULL, NULL, NULL, NULL}; /* 7 rows: the 4-row blocks and a tail */
  c.inp = randn(7 * 13, 1.0f);
  c.w = randn(10 * 13, 0.5f);
  c.b = randn(10, 0.5f);
  c.out = zeros(7 * 10);
  float *r = randn(7 * 10, 1.0f), *dinp = zeros(7 * 13), *dw = zeros(10 * 13), *db = zeros(10);
  fd_t f = {linear_fwd, &c, c.out, 70, r};
  linear_backward_ref(dinp, dw, db, r, c.inp, c.w, 7, 13, 10, 0);
  fd_expect(&f, "linear dinp", c.inp, 91, dinp);
  fd_expect(&f, "linear dweight", c.w, 130, dw);
  fd_expect(&f, "linear dbias", c.b, 10, db);
  /* parameter gradients accumulate, and dinp may be skipped */
  float *dw2 = zeros(130);
  for (int i = 0; i < 130; i++) dw2[i] = 1.0f;
  linear_backward_ref(NULL, dw2, NULL, r, c.inp, c.w, 7, 13, 10, 0);
  for (int i = 0; i < 130; i++) cr_expect_float_eq(dw2[i], 1.0f + dw[i], 1e-5f, "dweight[%d]", i);
}

// ----------------------------------------------------------------------------
// layernorm

typedef struct ln_ctx_s {
  int N, C;
  float *inp, *w, *b, *out, *mean, *rstd;
} ln_ctx_t;

static void ln_fwd(void *p) {
  ln_ctx_t *c = p;
  layernorm_forward_ref(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C, 0);
}

Test(kernels_fd, layernorm) {
  ln_ctx_t c = {5, 24, randn(5 * 24, 2.0f), randn(24, 1.0f), randn(24, 1.0f), zeros(5 * 24),
                zeros(5), zeros(5)};
  float *r = randn(5 * 24, 1.0f), *dinp = zeros(5 * 24), *dw = zeros(24), *db = zeros(24);
  fd_t f = {ln_fwd, &c, c.out, 5 * 24, r};
  ln_fwd(&c);
  layernorm_backward_ref(dinp, dw, db, r, c.inp, c.w, c.mean, c.rstd, 5, 24, 0);
  fd_expect(&f, "layernorm dinp", c.inp, 5 * 24, dinp);
  fd_expect(&f, "layernorm dweight", c.w, 24, dw);
  fd_expect(&f, "layernorm dbias", c.b, 24, db);
}

// ----------------------------------------------------------------------------
// attention

typedef struct att_ctx_s {
  int B, T, C, NH;
  float *qkv, *out, *att;
} att_ctx_t;

static void att_fwd(void *p) {
  att_ctx_t *c = p;
  attention_forward_ref(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH, 0);
}

Test(kernels_fd, attention) {
  att_ctx_t c = {2, 9, 12, 3, NULL, NULL, NULL};
  size_t nq = 2 * 9 * 36, ny = 2 * 9 * 12, na = 2 * 3 * 9 * 9;
  c.qkv = randn(nq, 1.0f);
  c.out = zeros(ny);
  c.att = zeros(na);
  float *r = randn(ny, 1.0f), *dqkv = zeros(nq), *datt = zeros(na);
  fd_t f = {att_fwd, &c, c.out, ny, r};
  att_fwd(&c);
  attention_backward_ref(dqkv, datt, r, c.qkv, c.att, 2, 9, 12, 3, 0);
  /* every query, key and value element: nq is below the sample cap x 10 */
  for (size_t base = 0; base < nq; base += FD_SAMPLES)
    fd_expect(&f, "attention dqkv", c.qkv + base, nq - base < FD_SAMPLES ? nq - base : FD_SAMPLES,
              dqkv + base);
}

// ----------------------------------------------------------------------------
// elementwise: GELU, residual

typedef struct ew_ctx_s {
  size_t n;
  float *a, *b, *out;
} ew_ctx_t;

static void gelu_fwd(void *p) {
  ew_ctx_t *c = p;
  gelu_forward_ref(c->out, c->a, c->n, 0);
}

static void residual_fwd(void *p) {
  ew_ctx_t *c = p;
  residual_forward_ref(c->out, c->a, c->b, c->n, 0);
}

Test(kernels_fd, gelu) {
  ew_ctx_t c = {64, zeros(64), NULL, zeros(64)};
  for (int i = 0; i < 64; i++) c.a[i] = -4.0f + 8.0f * i / 63.0f; /* the whole curve */
  float *r = randn(64, 1.0f), *dinp = zeros(64);
  fd_t f = {gelu_fwd, &c, c.out, 64, r};
  gelu_backward_ref(dinp, c.a, r, 64, 0);
  fd_expect(&f, "gelu dinp", c.a, 64, dinp);
}

Test(kernels_fd, residual) {
  ew_ctx_t c = {40, randn(40, 1.0f), randn(40, 1.0f), zeros(40)};
  float *r = randn(40, 1.0f);
  fd_t f = {residual_fwd, &c, c.out, 40, r};
  /* the backward of a sum hands dout to both terms */
  fd_expect(&f, "residual da", c.a, 40, r);
  fd_expect(&f, "residual db", c.b, 40, r);
}

// ----------------------------------------------------------------------------
// embedding, cross-entropy, sequence slices

typedef struct emb_ctx_s {
  int N, V, C;
  int *ids;
  float *table, *out;
} emb_ctx_t;

static void emb_fwd(void *p) {
  emb_ctx_t *c = p;
  embedding_forward_ref(c->out, c->ids, c->table, c->N, c->V, c->C, 0);
}

Test(kernels_fd, embedding) {
  int ids[9] = {3, 1, 3, 0, 4, 3, 1, 1, 2}; /* repeats: their gradients add up; row 5 unused */
  emb_ctx_t c = {9, 6, 5, ids, randn(6 * 5, 1.0f), zeros(9 * 5)};
  float *r = randn(9 * 5, 1.0f), *dtable = zeros(6 * 5);
  fd_t f = {emb_fwd, &c, c.out, 9 * 5, r};
  embedding_backward_ref(dtable, r, ids, 9, 6, 5, 0);
  fd_expect(&f, "embedding dtable", c.table, 6 * 5, dtable);
  for (int k = 0; k < 5; k++) cr_expect_eq(dtable[5 * 5 + k], 0.0f, "unused row has no gradient");
}

typedef struct ce_ctx_s {
  int N, V;
  int *targets;
  float *logits, *losses, *probs;
} ce_ctx_t;

static void ce_fwd(void *p) {
  ce_ctx_t *c = p;
  crossentropy_forward_ref(c->losses, c->probs, c->logits, c->targets, c->N, c->V, 0);
}

Test(kernels_fd, crossentropy) {
  int targets[6] = {2, -1, 0, 10, 5, -1}; /* -1: a position without a next token */
  ce_ctx_t c = {6, 11, targets, randn(6 * 11, 2.0f), zeros(6), zeros(6 * 11)};
  float r[6] = {1, 1, 1, 1, 1, 1}, *dlogits = zeros(6 * 11);
  fd_t f = {ce_fwd, &c, c.losses, 6, r}; /* L = the summed loss: scale 1 */
  ce_fwd(&c);
  crossentropy_backward_ref(dlogits, c.probs, targets, 1.0f, 6, 11, 0);
  fd_expect(&f, "crossentropy dlogits", c.logits, 6 * 11, dlogits);
  for (int v = 0; v < 11; v++) cr_expect_eq(dlogits[11 + v], 0.0f, "ignored row has no gradient");
}

typedef struct seq_ctx_s {
  int B, T, off, L, C;
  float *seq, *part;
  int scatter;
} seq_ctx_t;

static void seq_fwd(void *p) {
  seq_ctx_t *c = p;
  if (c->scatter) {
    memset(c->seq, 0, sizeof(float) * c->B * c->T * c->C);
    seq_scatter_ref(c->seq, c->part, c->B, c->T, c->off, c->L, c->C, 0);
  } else {
    seq_gather_ref(c->part, c->seq, c->B, c->T, c->off, c->L, c->C, 0);
  }
}

Test(kernels_fd, seq_scatter_and_gather) {
  seq_ctx_t c = {2, 7, 3, 3, 4, zeros(2 * 7 * 4), randn(2 * 3 * 4, 1.0f), 1};
  float *rs = randn(2 * 7 * 4, 1.0f), *rp = randn(2 * 3 * 4, 1.0f);
  float *dpart = zeros(2 * 3 * 4), *dseq = zeros(2 * 7 * 4);
  /* each is the other's backward */
  seq_gather_ref(dpart, rs, 2, 7, 3, 3, 4, 0);
  fd_t fs = {seq_fwd, &c, c.seq, 2 * 7 * 4, rs};
  fd_expect(&fs, "seq_scatter dpart", c.part, 2 * 3 * 4, dpart);
  seq_ctx_t g = c;
  g.scatter = 0;
  g.seq = randn(2 * 7 * 4, 1.0f);
  seq_scatter_ref(dseq, rp, 2, 7, 3, 3, 4, 0);
  fd_t fg = {seq_fwd, &g, g.part, 2 * 3 * 4, rp};
  fd_expect(&fg, "seq_gather dseq", g.seq, 2 * 7 * 4, dseq);
}

// ----------------------------------------------------------------------------
// the check itself

Test(kernels_fd, catches_a_wrong_gradient) {
  linear_ctx_t c = {4, 6, 5, randn(24, 1.0f), randn(30, 0.5f), randn(5, 0.5f), zeros(20)};
  float *r = randn(20, 1.0f), *dinp = zeros(24), *dw = zeros(30), *db = zeros(5);
  fd_t f = {linear_fwd, &c, c.out, 20, r};
  linear_backward_ref(dinp, dw, db, r, c.inp, c.w, 4, 6, 5, 0);
  cr_assert_eq(fd_check(&f, "linear dweight", c.w, 30, dw), 0);
  cr_assert_eq(fd_check(&f, "linear dbias", c.b, 5, db), 0);
  fd_quiet = 1;
  int big = 0, small = 0;
  for (int i = 0; i < 30; i++) big = fabsf(dw[i]) > fabsf(dw[big]) ? i : big;
  for (int i = 0; i < 5; i++) small = fabsf(db[i]) < fabsf(db[small]) ? i : small;
  dw[big] *= 1.05f; /* the largest element 5% off */
  cr_assert_eq(fd_check(&f, "broken dweight", c.w, 30, dw), 1);
  db[small] += 0.05f * (1.0f + fabsf(db[small])); /* the smallest, 5% + 0.05 off */
  cr_assert_eq(fd_check(&f, "broken dbias", c.b, 5, db), 1);
}
