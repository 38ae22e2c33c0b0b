/* The multimodal transformer (see model.h): parameters, forward, backward.
 *
 * Every activation goes through FALLOC when produced and RELEASE after its
 * last use; the comments at each RELEASE in the forward pass say why backward
 * does not need it. Shapes: B samples, T positions, N = B*T rows, C channels.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devmem.h"
#include "model.h"

#define FALLOC(n) ((float *)dev_alloc_at((size_t)(n) * sizeof(float), __FILE__, __LINE__))
#define RELEASE(p)                      \
  do {                                  \
    dev_free_at((p), __FILE__, __LINE__); \
    (p) = NULL;                         \
  } while (0)

enum { INIT_ZERO, INIT_ONE, INIT_NORMAL, INIT_RESIDUAL };

#define INIT_STD 0.02f

typedef struct layer_params_s {
  float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
  float *ln2_w, *ln2_b, *fc_w, *fc_b, *fcproj_w, *fcproj_b;
} layer_params_t;

typedef struct params_s {
  float *wte;                /* (V, C): text tokens, and the output head */
  float *wmod;               /* (MODALITIES, C) */
  float *patch_w, *patch_b;  /* (C, patch_dim), (C) */
  float *audio_w, *audio_b;  /* (C, mel_bins), (C) */
  float *lnf_w, *lnf_b;
  layer_params_t *layer;
} params_t;

/* What one block keeps for its backward pass. */
typedef struct layer_acts_s {
  float *x;                    /* (N, C) the block's input */
  float *ln1, *mean1, *rstd1;  /* (N, C), (N), (N) */
  float *qkv;                  /* (N, 3C) */
  float *att;                  /* (B, NH, T, T) */
  float *atty;                 /* (N, C) attention output before its projection */
  float *x1;                   /* (N, C) after the attention residual */
  float *ln2, *mean2, *rstd2;
  float *h, *g;                /* (N, 4C) MLP hidden before and after GELU */
} layer_acts_t;

typedef struct acts_s {
  float *patches, *audio;          /* inputs */
  int *tokens, *targets, *modality;
  layer_acts_t *layer;
  float *xL, *lnf_mean, *lnf_rstd; /* last block's output and final norm stats */
  float *htxt;                     /* (B*Tt, C) final norm at the text positions */
  float *probs;                    /* (B*Tt, V) */
} acts_t;

struct model_s {
  model_config_t cfg;
  const ops_t *ops;
  cudaStream_t stream;
  size_t num_params;
  model_tensor_t *tensors;
  int ntensors;
  float *params_mem, *grads_mem, *m_mem, *v_mem;
  params_t p, g;
  acts_t a;
  batch_shape_t shape;
  int targets_count;
  int active;     /* a forward pass holds activations */
  int leak_next;
  int t;          /* AdamW updates done */
};

// ----------------------------------------------------------------------------
// Parameters: one buffer, laid out by one walk over the tensors

typedef struct cursor_s {
  model_t *m;
  float *base;   /* NULL: only count (and record the tensors) */
  size_t off;
} cursor_t;

static float *take(cursor_t *c, const char *name, int layer, size_t count, int init) {
  if (!c->base) {
    model_tensor_t *t = &c->m->tensors[c->m->ntensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->layer = layer;
    t->offset = c->off;
    t->count = count;
    t->init = init;
  }
  float *p = c->base ? c->base + c->off : NULL;
  c->off += count;
  return p;
}

static void layout_layer(cursor_t *c, int l, layer_params_t *lp) {
  size_t C = (size_t)c->m->cfg.channels;
  lp->ln1_w = take(c, "ln1_w", l, C, INIT_ONE);
  lp->ln1_b = take(c, "ln1_b", l, C, INIT_ZERO);
  lp->qkv_w = take(c, "qkv_w", l, 3 * C * C, INIT_NORMAL);
  lp->qkv_b = take(c, "qkv_b", l, 3 * C, INIT_ZERO);
  lp->proj_w = take(c, "proj_w", l, C * C, INIT_RESIDUAL);
  lp->proj_b = take(c, "proj_b", l, C, INIT_ZERO);
  lp->ln2_w = take(c, "ln2_w", l, C, INIT_ONE);
  lp->ln2_b = take(c, "ln2_b", l, C, INIT_ZERO);
  lp->fc_w = take(c, "fc_w", l, 4 * C * C, INIT_NORMAL);
  lp->fc_b = take(c, "fc_b", l, 4 * C, INIT_ZERO);
  lp->fcproj_w = take(c, "fcproj_w", l, 4 * C * C, INIT_RESIDUAL);
  lp->fcproj_b = take(c, "fcproj_b", l, C, INIT_ZERO);
}

/* Walks every tensor in a fixed order; returns the number of floats. */
static size_t layout(model_t *m, float *base, params_t *p) {
  const model_config_t *cf = &m->cfg;
  size_t C = (size_t)cf->channels;
  cursor_t c = {m, base, 0};
  p->wte = take(&c, "wte", -1, (size_t)cf->vocab * C, INIT_NORMAL);
  p->wmod = take(&c, "wmod", -1, MODALITIES * C, INIT_NORMAL);
  p->patch_w = take(&c, "patch_w", -1, C * (size_t)cf->patch_dim, INIT_NORMAL);
  p->patch_b = take(&c, "patch_b", -1, C, INIT_ZERO);
  p->audio_w = take(&c, "audio_w", -1, C * (size_t)cf->mel_bins, INIT_NORMAL);
  p->audio_b = take(&c, "audio_b", -1, C, INIT_ZERO);
  for (int l = 0; l < cf->layers; l++) layout_layer(&c, l, &p->layer[l]);
  p->lnf_w = take(&c, "lnf_w", -1, C, INIT_ONE);
  p->lnf_b = take(&c, "lnf_b", -1, C, INIT_ZERO);
  return c.off;
}

/* GPT-2's initialization: residual projections scaled by 1/sqrt(2 layers). */
static void init_params(model_t *m, uint64_t seed) {
  float *host = calloc(m->num_params, sizeof(float));
  assert(host);
  uint64_t st = seed ^ 0x6a09e667f3bcc909ULL;
  float resid = INIT_STD / sqrtf(2.0f * (float)m->cfg.layers);
  for (int i = 0; i < m->ntensors; i++) {
    const model_tensor_t *t = &m->tensors[i];
    for (size_t k = 0; k < t->count; k++) {
      float *x = host + t->offset + k;
      if (t->init == INIT_ONE) *x = 1.0f;
      if (t->init == INIT_NORMAL) *x = INIT_STD * data_normal(&st);
      if (t->init == INIT_RESIDUAL) *x = resid * data_normal(&st);
    }
  }
  dev_upload(m->params_mem, host, m->num_params * sizeof(float));
  free(host);
}

const char *model_config_check(const model_config_t *cf) {
  if (cf->layers < 1 || cf->channels < 1 || cf->heads < 1 || cf->vocab < 1)
    return "layers, channels, heads and vocabulary must be at least 1";
  if (cf->channels % cf->heads) return "channels must be a multiple of heads";
  if (cf->patch_dim < 1 || cf->mel_bins < 1) return "patch and mel sizes must be at least 1";
  return NULL;
}

model_t *model_create(const model_config_t *cfg, const ops_t *ops, uint64_t seed) {
  assert(!model_config_check(cfg));
  model_t *m = calloc(1, sizeof *m);
  assert(m);
  m->cfg = *cfg;
  m->ops = ops;
  m->stream = 0; /* the legacy default stream, as a plain training loop uses */
  m->tensors = calloc(6 + 12 * (size_t)cfg->layers + 2, sizeof(model_tensor_t));
  m->p.layer = calloc((size_t)cfg->layers, sizeof(layer_params_t));
  m->g.layer = calloc((size_t)cfg->layers, sizeof(layer_params_t));
  m->a.layer = calloc((size_t)cfg->layers, sizeof(layer_acts_t));
  assert(m->tensors && m->p.layer && m->g.layer && m->a.layer);
  m->num_params = layout(m, NULL, &m->p);
  size_t bytes = m->num_params * sizeof(float);
  m->params_mem = dev_alloc(bytes);
  m->grads_mem = dev_alloc(bytes);
  m->m_mem = dev_alloc(bytes);
  m->v_mem = dev_alloc(bytes);
  layout(m, m->params_mem, &m->p);
  layout(m, m->grads_mem, &m->g);
  dev_zero(m->grads_mem, bytes);
  dev_zero(m->m_mem, bytes);
  dev_zero(m->v_mem, bytes);
  init_params(m, seed);
  return m;
}

void model_destroy(model_t *m) {
  if (!m) return;
  model_discard(m);
  dev_free(m->params_mem);
  dev_free(m->grads_mem);
  dev_free(m->m_mem);
  dev_free(m->v_mem);
  free(m->tensors);
  free(m->p.layer);
  free(m->g.layer);
  free(m->a.layer);
  free(m);
}

// ----------------------------------------------------------------------------
// Forward

static void *upload_new(const void *src, size_t bytes, const char *file, int line) {
  void *p = dev_alloc_at(bytes, file, line);
  dev_upload(p, src, bytes);
  return p;
}
#define UPLOAD(src, n) upload_new((src), (size_t)(n) * sizeof(*(src)), __FILE__, __LINE__)

/* Image, audio and text embedded, concatenated, plus the modality embedding. */
static float *embed_forward(model_t *m, const batch_t *bt) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  const batch_shape_t *sh = &bt->shape;
  int B = sh->B, T = sh->T, C = m->cfg.channels, N = B * T;
  acts_t *a = &m->a;
  a->patches = UPLOAD(bt->patches, (size_t)B * sh->Ti * m->cfg.patch_dim);
  a->audio = UPLOAD(bt->audio, (size_t)B * sh->Ta * m->cfg.mel_bins);
  a->tokens = UPLOAD(bt->tokens, B * sh->Tt);
  a->targets = UPLOAD(bt->targets, B * sh->Tt);
  a->modality = UPLOAD(bt->modality, N);
  float *img = FALLOC((size_t)B * sh->Ti * C), *aud = FALLOC((size_t)B * sh->Ta * C);
  float *txt = FALLOC((size_t)B * sh->Tt * C), *seq = FALLOC((size_t)N * C);
  o->linear_forward(img, a->patches, m->p.patch_w, m->p.patch_b, B * sh->Ti, m->cfg.patch_dim, C, s);
  o->linear_forward(aud, a->audio, m->p.audio_w, m->p.audio_b, B * sh->Ta, m->cfg.mel_bins, C, s);
  o->embedding_forward(txt, a->tokens, m->p.wte, B * sh->Tt, m->cfg.vocab, C, s);
  o->seq_scatter(seq, img, B, T, 0, sh->Ti, C, s);
  o->seq_scatter(seq, aud, B, T, sh->Ti, sh->Ta, C, s);
  o->seq_scatter(seq, txt, B, T, sh->Ti + sh->Ta, sh->Tt, C, s);
  RELEASE(img); /* the backward passes of the three need their inputs, not outputs */
  RELEASE(aud);
  RELEASE(txt);
  float *mod = FALLOC((size_t)N * C), *x = FALLOC((size_t)N * C);
  o->embedding_forward(mod, a->modality, m->p.wmod, N, MODALITIES, C, s);
  o->residual_forward(x, seq, mod, (size_t)N * C, s);
  RELEASE(seq); /* a sum's backward needs neither term */
  RELEASE(mod);
  return x;
}

/* One pre-norm block: x + attn(ln1(x)), then + mlp(ln2(.)). Keeps x. */
static float *block_forward(model_t *m, int l, float *x) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  int B = m->shape.B, T = m->shape.T, C = m->cfg.channels, NH = m->cfg.heads, N = B * T;
  const layer_params_t *p = &m->p.layer[l];
  layer_acts_t *a = &m->a.layer[l];
  a->x = x;
  a->ln1 = FALLOC((size_t)N * C);
  a->mean1 = FALLOC(N);
  a->rstd1 = FALLOC(N);
  o->layernorm_forward(a->ln1, a->mean1, a->rstd1, x, p->ln1_w, p->ln1_b, N, C, s);
  a->qkv = FALLOC((size_t)N * 3 * C);
  o->linear_forward(a->qkv, a->ln1, p->qkv_w, p->qkv_b, N, C, 3 * C, s);
  a->att = FALLOC((size_t)B * NH * T * T);
  a->atty = FALLOC((size_t)N * C);
  o->attention_forward(a->atty, a->att, a->qkv, B, T, C, NH, s);
  float *proj = FALLOC((size_t)N * C);
  o->linear_forward(proj, a->atty, p->proj_w, p->proj_b, N, C, C, s);
  a->x1 = FALLOC((size_t)N * C);
  o->residual_forward(a->x1, x, proj, (size_t)N * C, s);
  RELEASE(proj); /* a sum's backward needs neither term */
  a->ln2 = FALLOC((size_t)N * C);
  a->mean2 = FALLOC(N);
  a->rstd2 = FALLOC(N);
  o->layernorm_forward(a->ln2, a->mean2, a->rstd2, a->x1, p->ln2_w, p->ln2_b, N, C, s);
  a->h = FALLOC((size_t)N * 4 * C);
  o->linear_forward(a->h, a->ln2, p->fc_w, p->fc_b, N, C, 4 * C, s);
  a->g = FALLOC((size_t)N * 4 * C);
  o->gelu_forward(a->g, a->h, (size_t)N * 4 * C, s);
  float *mlp = FALLOC((size_t)N * C), *out = FALLOC((size_t)N * C);
  o->linear_forward(mlp, a->g, p->fcproj_w, p->fcproj_b, N, 4 * C, C, s);
  o->residual_forward(out, a->x1, mlp, (size_t)N * C, s);
  RELEASE(mlp);
  return out;
}

/* Final norm, text rows, output head and loss; returns the mean loss. */
static float head_forward(model_t *m, float *x) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  int B = m->shape.B, T = m->shape.T, Tt = m->shape.Tt, C = m->cfg.channels, V = m->cfg.vocab;
  int N = B * T, Nt = B * Tt;
  acts_t *a = &m->a;
  a->xL = x;
  float *lnf = FALLOC((size_t)N * C);
  a->lnf_mean = FALLOC(N);
  a->lnf_rstd = FALLOC(N);
  o->layernorm_forward(lnf, a->lnf_mean, a->lnf_rstd, x, m->p.lnf_w, m->p.lnf_b, N, C, s);
  a->htxt = FALLOC((size_t)Nt * C);
  o->seq_gather(a->htxt, lnf, B, T, T - Tt, Tt, C, s);
  RELEASE(lnf); /* the head's backward needs only the text rows */
  float *logits = FALLOC((size_t)Nt * V), *losses = FALLOC(Nt);
  a->probs = FALLOC((size_t)Nt * V);
  o->linear_forward(logits, a->htxt, m->p.wte, NULL, Nt, C, V, s);
  o->crossentropy_forward(losses, a->probs, logits, a->targets, Nt, V, s);
  RELEASE(logits); /* the loss's backward uses the probabilities */
  float *host = malloc((size_t)Nt * sizeof(float));
  assert(host);
  dev_download(host, losses, (size_t)Nt * sizeof(float));
  RELEASE(losses);
  double sum = 0.0;
  for (int i = 0; i < Nt; i++) sum += host[i];
  free(host);
  return (float)(sum / m->targets_count);
}

float model_forward(model_t *m, const batch_t *bt) {
  assert(!m->active && bt->targets_count > 0);
  m->shape = bt->shape;
  m->targets_count = bt->targets_count;
  m->active = 1;
  float *x = embed_forward(m, bt);
  for (int l = 0; l < m->cfg.layers; l++) x = block_forward(m, l, x);
  return head_forward(m, x);
}

// ----------------------------------------------------------------------------
// Backward: the same walk in reverse; each gradient is a fresh buffer

static float *head_backward(model_t *m) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  int B = m->shape.B, T = m->shape.T, Tt = m->shape.Tt, C = m->cfg.channels, V = m->cfg.vocab;
  int N = B * T, Nt = B * Tt;
  acts_t *a = &m->a;
  float *dlogits = FALLOC((size_t)Nt * V);
  o->crossentropy_backward(dlogits, a->probs, a->targets, 1.0f / (float)m->targets_count, Nt, V, s);
  RELEASE(a->probs);
  RELEASE(a->targets);
  float *dhtxt = FALLOC((size_t)Nt * C);
  o->linear_backward(dhtxt, m->g.wte, NULL, dlogits, a->htxt, m->p.wte, Nt, C, V, s);
  RELEASE(dlogits);
  RELEASE(a->htxt);
  float *dlnf = FALLOC((size_t)N * C);
  dev_zero(dlnf, (size_t)N * C * sizeof(float)); /* only the text rows have a gradient */
  o->seq_scatter(dlnf, dhtxt, B, T, T - Tt, Tt, C, s);
  RELEASE(dhtxt);
  float *dx = FALLOC((size_t)N * C);
  o->layernorm_backward(dx, m->g.lnf_w, m->g.lnf_b, dlnf, a->xL, m->p.lnf_w, a->lnf_mean,
                        a->lnf_rstd, N, C, s);
  RELEASE(dlnf);
  RELEASE(a->lnf_mean);
  RELEASE(a->lnf_rstd);
  RELEASE(a->xL);
  return dx;
}

/* A pre-norm branch point: x feeds both the residual path and layernorm(x). */
typedef struct norm_s {
  float **x, **mean, **rstd;   /* saved by forward; freed here */
  const float *w;
  float *dw, *db;
} norm_t;

/* The gradient at the branch point: dskip (from the residual path) plus the
 * layernorm's backward of dnormed. Frees dnormed and what the norm saved. */
static float *branch_backward(model_t *m, norm_t *n, float **dnormed, const float *dskip) {
  int N = m->shape.B * m->shape.T, C = m->cfg.channels;
  float *dnorm = FALLOC((size_t)N * C), *dx = FALLOC((size_t)N * C);
  m->ops->layernorm_backward(dnorm, n->dw, n->db, *dnormed, *n->x, n->w, *n->mean, *n->rstd, N,
                             C, m->stream);
  RELEASE(*dnormed);
  RELEASE(*n->mean);
  RELEASE(*n->rstd);
  RELEASE(*n->x);
  m->ops->residual_forward(dx, dskip, dnorm, (size_t)N * C, m->stream);
  RELEASE(dnorm);
  return dx;
}

/* The MLP half of a block: returns the gradient at x1 (residual included). */
static float *mlp_backward(model_t *m, int l, float *dout) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  int N = m->shape.B * m->shape.T, C = m->cfg.channels;
  const layer_params_t *p = &m->p.layer[l];
  layer_params_t *g = &m->g.layer[l];
  layer_acts_t *a = &m->a.layer[l];
  float *dg = FALLOC((size_t)N * 4 * C);
  o->linear_backward(dg, g->fcproj_w, g->fcproj_b, dout, a->g, p->fcproj_w, N, 4 * C, C, s);
  RELEASE(a->g);
  float *dh = FALLOC((size_t)N * 4 * C);
  o->gelu_backward(dh, a->h, dg, (size_t)N * 4 * C, s);
  RELEASE(dg);
  if (m->leak_next && l == 0) {
    a->h = NULL; /* --leak-every: dropped without a free */
    m->leak_next = 0;
  } else {
    RELEASE(a->h);
  }
  float *dln2 = FALLOC((size_t)N * C);
  o->linear_backward(dln2, g->fc_w, g->fc_b, dh, a->ln2, p->fc_w, N, C, 4 * C, s);
  RELEASE(dh);
  RELEASE(a->ln2);
  norm_t n2 = {&a->x1, &a->mean2, &a->rstd2, p->ln2_w, g->ln2_w, g->ln2_b};
  return branch_backward(m, &n2, &dln2, dout);
}

/* The attention half of a block: returns the gradient at the block's input. */
static float *attn_backward(model_t *m, int l, float *dx1) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  int B = m->shape.B, T = m->shape.T, C = m->cfg.channels, NH = m->cfg.heads, N = B * T;
  const layer_params_t *p = &m->p.layer[l];
  layer_params_t *g = &m->g.layer[l];
  layer_acts_t *a = &m->a.layer[l];
  float *datty = FALLOC((size_t)N * C);
  o->linear_backward(datty, g->proj_w, g->proj_b, dx1, a->atty, p->proj_w, N, C, C, s);
  RELEASE(a->atty);
  float *dqkv = FALLOC((size_t)N * 3 * C), *datt = FALLOC((size_t)B * NH * T * T);
  o->attention_backward(dqkv, datt, datty, a->qkv, a->att, B, T, C, NH, s);
  RELEASE(datt);
  RELEASE(datty);
  RELEASE(a->qkv);
  RELEASE(a->att);
  float *dln1 = FALLOC((size_t)N * C);
  o->linear_backward(dln1, g->qkv_w, g->qkv_b, dqkv, a->ln1, p->qkv_w, N, C, 3 * C, s);
  RELEASE(dqkv);
  RELEASE(a->ln1);
  norm_t n1 = {&a->x, &a->mean1, &a->rstd1, p->ln1_w, g->ln1_w, g->ln1_b};
  return branch_backward(m, &n1, &dln1, dx1);
}

/* Gradients of the modality, patch, audio and token embeddings. */
static void embed_backward(model_t *m, float *dx) {
  const ops_t *o = m->ops;
  cudaStream_t s = m->stream;
  const batch_shape_t *sh = &m->shape;
  int B = sh->B, T = sh->T, C = m->cfg.channels;
  acts_t *a = &m->a;
  o->embedding_backward(m->g.wmod, dx, a->modality, B * T, MODALITIES, C, s);
  RELEASE(a->modality);
  float *dimg = FALLOC((size_t)B * sh->Ti * C);
  o->seq_gather(dimg, dx, B, T, 0, sh->Ti, C, s);
  o->linear_backward(NULL, m->g.patch_w, m->g.patch_b, dimg, a->patches, m->p.patch_w,
                     B * sh->Ti, m->cfg.patch_dim, C, s);
  RELEASE(dimg);
  RELEASE(a->patches);
  float *daud = FALLOC((size_t)B * sh->Ta * C);
  o->seq_gather(daud, dx, B, T, sh->Ti, sh->Ta, C, s);
  o->linear_backward(NULL, m->g.audio_w, m->g.audio_b, daud, a->audio, m->p.audio_w,
                     B * sh->Ta, m->cfg.mel_bins, C, s);
  RELEASE(daud);
  RELEASE(a->audio);
  float *dtxt = FALLOC((size_t)B * sh->Tt * C);
  o->seq_gather(dtxt, dx, B, T, sh->Ti + sh->Ta, sh->Tt, C, s);
  o->embedding_backward(m->g.wte, dtxt, a->tokens, B * sh->Tt, m->cfg.vocab, C, s);
  RELEASE(dtxt);
  RELEASE(a->tokens);
}

void model_backward(model_t *m) {
  assert(m->active);
  dev_zero(m->grads_mem, m->num_params * sizeof(float));
  float *dx = head_backward(m);
  for (int l = m->cfg.layers - 1; l >= 0; l--) {
    float *dx1 = mlp_backward(m, l, dx);
    RELEASE(dx);
    dx = attn_backward(m, l, dx1);
    RELEASE(dx1);
  }
  embed_backward(m, dx);
  RELEASE(dx);
  m->active = 0;
}

void model_discard(model_t *m) {
  acts_t *a = &m->a;
  for (int l = 0; l < m->cfg.layers; l++) {
    layer_acts_t *la = &a->layer[l];
    float **f[] = {&la->x, &la->ln1, &la->mean1, &la->rstd1, &la->qkv, &la->att, &la->atty,
                   &la->x1, &la->ln2, &la->mean2, &la->rstd2, &la->h, &la->g};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) RELEASE(*f[i]);
  }
  RELEASE(a->patches);
  RELEASE(a->audio);
  RELEASE(a->tokens);
  RELEASE(a->targets);
  RELEASE(a->modality);
  RELEASE(a->xL);
  RELEASE(a->lnf_mean);
  RELEASE(a->lnf_rstd);
  RELEASE(a->htxt);
  RELEASE(a->probs);
  m->active = 0;
}

void model_update(model_t *m, float lr, float weight_decay) {
  adamw_hparams_t hp = {lr, 0.9f, 0.999f, 1e-8f, weight_decay, ++m->t};
  m->ops->adamw_update(m->params_mem, m->grads_mem, m->m_mem, m->v_mem, m->num_params, hp,
                       m->stream);
}

void model_leak_next_backward(model_t *m) { m->leak_next = 1; }

size_t model_num_params(const model_t *m) { return m->num_params; }
float *model_params(model_t *m) { return m->params_mem; }
float *model_grads(model_t *m) { return m->grads_mem; }
int model_tensor_count(const model_t *m) { return m->ntensors; }
const model_tensor_t *model_tensor(const model_t *m, int i) { return &m->tensors[i]; }
