/* The multimodal model of kernels/, run with the C references on the host-
 * malloc memory layer (devmem_host.c): its gradient against finite
 * differences through the whole network, its memory pattern (every
 * activation freed within the step, parameters and optimizer state once),
 * the deliberate leak of --leak-every, the synthetic data, and learning. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "data.h"
#include "devmem.h"
#include "model.h"

/* A small model and batches that keep finite differences fast. */
static const model_config_t tiny_model = {.layers = 2, .channels = 16, .heads = 2, .vocab = 24,
                                          .patch_dim = 12, .mel_bins = 6};
static const data_config_t tiny_data = {.max_batch = 3, .grid = 2, .patch = 2, .max_frames = 2,
                                        .min_audio = 2, .max_audio = 5, .mel_bins = 6,
                                        .min_text = 3, .max_text = 7, .classes = 4, .vocab = 24};

static size_t state_bytes(const model_t *m) { return 4 * model_num_params(m) * sizeof(float); }

static dev_counters_t counters(void) {
  dev_counters_t c;
  dev_counters(&c);
  return c;
}

static float train_step(model_t *m, int step, float lr) {
  batch_t b;
  data_make(&tiny_data, 7, step, &b);
  float loss = model_forward(m, &b);
  model_backward(m);
  model_update(m, lr, 0.0f);
  data_free(&b);
  return loss;
}

/* FD_SEED=n draws another model and batch (to confirm the tolerance's margin). */
static uint64_t fd_seed(void) {
  const char *s = getenv("FD_SEED");
  return s ? strtoull(s, NULL, 0) : 3;
}

Test(kernels_model, gradient_matches_finite_differences) {
  model_t *m = model_create(&tiny_model, &ops_ref, fd_seed());
  batch_t b;
  data_make(&tiny_data, fd_seed() + 4, 1, &b);
  model_forward(m, &b);
  model_backward(m);
  float *p = model_params(m), *g = model_grads(m);
  int checked = 0, bad = 0;
  double worst = 0.0;
  for (int k = 0; k < model_tensor_count(m); k++) {
    const model_tensor_t *t = model_tensor(m, k);
    /* the element with the largest gradient, and one more */
    size_t big = t->offset;
    for (size_t i = t->offset; i < t->offset + t->count; i++) big = fabsf(g[i]) > fabsf(g[big]) ? i : big;
    size_t picks[2] = {big, t->offset + (t->count * 7 + 3) / 11 % t->count};
    for (int j = 0; j < 2; j++) {
      size_t i = picks[j];
      float x0 = p[i], h = 2e-3f;
      p[i] = x0 + h;
      float xp = p[i];
      double lp = model_forward(m, &b);
      model_discard(m);
      p[i] = x0 - h;
      float xm = p[i];
      double lm = model_forward(m, &b);
      model_discard(m);
      p[i] = x0;
      double num = (lp - lm) / ((double)xp - xm), tol = 5e-4 + 1e-2 * fabs(num);
      double err = fabs(num - g[i]);
      worst = fmax(worst, err / tol);
      checked++;
      if (err > tol && bad++ < 8)
        cr_log_error("%s (layer %d) [%zu]: analytic %.6g, numeric %.6g", t->name, t->layer,
                     i - t->offset, g[i], num);
    }
  }
  if (getenv("FD_VERBOSE")) fprintf(stderr, "model fd: worst error/tolerance %.4f\n", worst);
  cr_expect_eq(bad, 0, "%d of %d parameter gradients differ from finite differences", bad, checked);
  cr_expect_eq(checked, 2 * model_tensor_count(m));
  data_free(&b);
  model_destroy(m);
}

Test(kernels_model, activations_live_only_within_a_step) {
  model_t *m = model_create(&tiny_model, &ops_ref, 3);
  size_t state = state_bytes(m);
  cr_assert_eq(counters().live_bytes, state, "parameters, gradients and two moments");
  size_t last_allocs = counters().total_allocs;
  for (int step = 0; step < 4; step++) {
    train_step(m, step, 1e-3f);
    dev_counters_t c = counters();
    cr_expect_eq(c.live_bytes, state, "step %d left %zu bytes", step, c.live_bytes - state);
    cr_expect_eq(c.live_blocks, 4);
    /* a framework without a cache: dozens of allocations every step */
    cr_expect_gt(c.total_allocs - last_allocs, 20 * (size_t)tiny_model.layers);
    cr_expect_gt(c.peak_bytes, state);
    last_allocs = c.total_allocs;
  }
  /* a forward pass without backward frees everything too */
  batch_t b;
  data_make(&tiny_data, 7, 9, &b);
  model_forward(m, &b);
  cr_expect_gt(counters().live_bytes, state);
  model_discard(m);
  cr_expect_eq(counters().live_bytes, state);
  data_free(&b);
  model_destroy(m);
  cr_expect_eq(counters().live_bytes, 0);
  cr_expect_eq(counters().live_blocks, 0);
}

Test(kernels_model, leak_switch_keeps_one_activation) {
  model_t *m = model_create(&tiny_model, &ops_ref, 3);
  size_t state = state_bytes(m);
  batch_t b;
  data_make(&tiny_data, 7, 0, &b);
  size_t h_bytes = (size_t)b.shape.B * b.shape.T * 4 * tiny_model.channels * sizeof(float);
  data_free(&b);
  model_leak_next_backward(m);
  train_step(m, 0, 1e-3f); /* step 0: the largest batch, the shape computed above */
  cr_expect_eq(counters().live_blocks, 5);
  cr_expect_eq(counters().live_bytes, state + h_bytes, "the first block's MLP input leaks");
  train_step(m, 1, 1e-3f); /* the switch is one-shot */
  cr_expect_eq(counters().live_blocks, 5);
  model_destroy(m);
  cr_expect_eq(counters().live_bytes, h_bytes, "still there at exit");
}

Test(kernels_model, loss_falls) {
  model_t *m = model_create(&tiny_model, &ops_ref, 3);
  double first = 0.0, last = 0.0;
  for (int step = 0; step < 60; step++) {
    float loss = train_step(m, step, 1e-2f);
    cr_assert(isfinite(loss), "step %d loss %f", step, loss);
    if (step < 5) first += loss / 5;
    if (step >= 55) last += loss / 5;
  }
  cr_expect_lt(last, 0.7 * first, "loss %.3f -> %.3f", first, last);
  model_destroy(m);
}

Test(kernels_model, batches_change_every_step) {
  batch_shape_t s0, s;
  data_shape(&tiny_data, 11, 0, &s0);
  cr_expect_eq(s0.B, tiny_data.max_batch, "step 0 is the largest composition");
  cr_expect_eq(s0.frames, tiny_data.max_frames);
  cr_expect_eq(s0.Ta, tiny_data.max_audio);
  cr_expect_eq(s0.Tt, tiny_data.max_text);
  int distinct = 0, prev_T = s0.T;
  for (int step = 1; step < 50; step++) {
    data_shape(&tiny_data, 11, step, &s);
    cr_expect(s.B >= 1 && s.B <= tiny_data.max_batch);
    cr_expect(s.Ta >= tiny_data.min_audio && s.Ta <= tiny_data.max_audio);
    cr_expect(s.Tt >= tiny_data.min_text && s.Tt <= tiny_data.max_text);
    cr_expect_eq(s.Ti, s.frames * tiny_data.grid * tiny_data.grid);
    cr_expect_eq(s.T, s.Ti + s.Ta + s.Tt);
    distinct += s.T != prev_T;
    prev_T = s.T;
    batch_shape_t again;
    data_shape(&tiny_data, 11, step, &again);
    cr_expect_eq(again.T * 100 + again.B, s.T * 100 + s.B, "the seed decides");
  }
  cr_expect_gt(distinct, 30, "sequence length changed %d times in 49 steps", distinct);
}

Test(kernels_model, text_follows_image_and_audio) {
  batch_t b;
  data_make(&tiny_data, 5, 3, &b);
  const batch_shape_t *s = &b.shape;
  for (int i = 0; i < s->B; i++) {
    const int *tok = b.tokens + i * s->Tt, *tgt = b.targets + i * s->Tt;
    cr_expect_eq(tok[0], 0, "BOS first");
    for (int t = 0; t + 1 < s->Tt; t++) cr_expect_eq(tgt[t], tok[t + 1], "next token");
    cr_expect_eq(tgt[s->Tt - 1], -1, "no target after the last token");
    for (int t = 3; t < s->Tt; t++) cr_expect_eq(tok[t], tok[t - 2], "the two classes alternate");
    const int *mod = b.modality + i * s->T;
    cr_expect_eq(mod[0], MODALITY_IMAGE);
    cr_expect_eq(mod[s->Ti], MODALITY_AUDIO);
    cr_expect_eq(mod[s->T - 1], MODALITY_TEXT);
  }
  cr_expect_eq(b.targets_count, s->B * (s->Tt - 1));
  data_free(&b);
}
