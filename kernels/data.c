/* Synthetic multimodal batches (see data.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "data.h"

#define BOS 0
#define NOISE 0.5f /* of the prototypes' unit scale: classes stay separable */

uint64_t data_rand(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

float data_uniform(uint64_t *state) { return (float)(data_rand(state) >> 40) / 16777216.0f; }

float data_normal(uint64_t *state) {
  float u1 = data_uniform(state), u2 = data_uniform(state);
  return sqrtf(-2.0f * logf(1.0f - u1)) * cosf(6.2831853f * u2);
}

static int uniform_int(uint64_t *state, int lo, int hi) {
  return lo + (int)(data_rand(state) % (uint64_t)(hi - lo + 1));
}

int data_patch_dim(const data_config_t *dc) { return dc->patch * dc->patch * 3; }

const char *data_config_check(const data_config_t *dc) {
  if (dc->max_batch < 1 || dc->max_frames < 1 || dc->grid < 1 || dc->patch < 1)
    return "batch, frames, grid and patch must be at least 1";
  if (dc->min_audio < 1 || dc->max_audio < dc->min_audio) return "need 1 <= min-audio <= max-audio";
  if (dc->min_text < 2 || dc->max_text < dc->min_text) return "need 2 <= min-text <= max-text";
  if (dc->mel_bins < 1 || dc->classes < 1) return "mel bins and classes must be at least 1";
  if (dc->vocab < 1 + 2 * dc->classes) return "the vocabulary must hold BOS and 2 x classes tokens";
  return NULL;
}

void data_shape(const data_config_t *dc, uint64_t seed, int step, batch_shape_t *out) {
  uint64_t st = seed ^ (0x5851f42d4c957f2dULL * (uint64_t)(step + 1));
  int largest = step == 0;
  out->B = largest ? dc->max_batch : uniform_int(&st, 1, dc->max_batch);
  out->frames = largest ? dc->max_frames : uniform_int(&st, 1, dc->max_frames);
  out->Ta = largest ? dc->max_audio : uniform_int(&st, dc->min_audio, dc->max_audio);
  out->Tt = largest ? dc->max_text : uniform_int(&st, dc->min_text, dc->max_text);
  out->Ti = out->frames * dc->grid * dc->grid;
  out->T = out->Ti + out->Ta + out->Tt;
}

/* Prototype k of a family (image or audio): the same for the whole run. */
static void prototype(float *out, int dim, uint64_t seed, int family, int k) {
  uint64_t st = seed ^ (0x2545f4914f6cdd1dULL * (uint64_t)(family * 1000 + k + 1));
  for (int i = 0; i < dim; i++) out[i] = data_normal(&st);
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "data: out of host memory (%zu bytes)\n", bytes);
    exit(EXIT_FAILURE);
  }
  return p;
}

/* Rows of `dim` values: the class prototype plus noise, for one sample. */
static void fill_rows(float *rows, int count, int dim, const float *proto, uint64_t *st) {
  for (int r = 0; r < count; r++)
    for (int i = 0; i < dim; i++) rows[(size_t)r * dim + i] = proto[i] + NOISE * data_normal(st);
}

static void fill_text(const data_config_t *dc, const batch_shape_t *s, int b, int ci, int ca,
                      batch_t *out) {
  int *tok = out->tokens + (size_t)b * s->Tt, *tgt = out->targets + (size_t)b * s->Tt;
  tok[0] = BOS;
  for (int i = 1; i < s->Tt; i++) tok[i] = i % 2 ? 1 + ci : 1 + dc->classes + ca;
  for (int i = 0; i < s->Tt; i++) tgt[i] = i + 1 < s->Tt ? tok[i + 1] : -1;
  int *mod = out->modality + (size_t)b * s->T;
  for (int t = 0; t < s->T; t++)
    mod[t] = t < s->Ti ? MODALITY_IMAGE : t < s->Ti + s->Ta ? MODALITY_AUDIO : MODALITY_TEXT;
}

void data_make(const data_config_t *dc, uint64_t seed, int step, batch_t *out) {
  batch_shape_t s;
  data_shape(dc, seed, step, &s);
  int pd = data_patch_dim(dc), md = dc->mel_bins;
  out->shape = s;
  out->patches = xmalloc(sizeof(float) * (size_t)s.B * s.Ti * pd);
  out->audio = xmalloc(sizeof(float) * (size_t)s.B * s.Ta * md);
  out->tokens = xmalloc(sizeof(int) * (size_t)s.B * s.Tt);
  out->targets = xmalloc(sizeof(int) * (size_t)s.B * s.Tt);
  out->modality = xmalloc(sizeof(int) * (size_t)s.B * s.T);
  out->targets_count = s.B * (s.Tt - 1);
  float *pi = xmalloc(sizeof(float) * (size_t)pd), *pa = xmalloc(sizeof(float) * (size_t)md);
  uint64_t st = seed ^ (0x9fb21c651e98df25ULL * (uint64_t)(step + 1));
  for (int b = 0; b < s.B; b++) {
    int ci = uniform_int(&st, 0, dc->classes - 1), ca = uniform_int(&st, 0, dc->classes - 1);
    prototype(pi, pd, seed, 0, ci);
    prototype(pa, md, seed, 1, ca);
    fill_rows(out->patches + (size_t)b * s.Ti * pd, s.Ti, pd, pi, &st);
    fill_rows(out->audio + (size_t)b * s.Ta * md, s.Ta, md, pa, &st);
    fill_text(dc, &s, b, ci, ca, out);
  }
  free(pi);
  free(pa);
}

void data_free(batch_t *b) {
  free(b->patches);
  free(b->audio);
  free(b->tokens);
  free(b->targets);
  free(b->modality);
  b->patches = b->audio = NULL;
  b->tokens = b->targets = b->modality = NULL;
}
