/* The multimodal transformer, written once against the ops table (ops.h) and
 * the device memory layer (devmem.h).
 *
 * Inputs per sample: image patches (linearly embedded), audio frames
 * (linearly projected), text tokens (embedding). A modality embedding is
 * added, the three are concatenated into one sequence (image, audio, text),
 * and N pre-norm transformer blocks (layernorm, causal multi-head attention,
 * MLP with GELU, residuals) lead to a final layernorm and the output head
 * (tied with the token table), applied to the text positions only, with a
 * next-token cross-entropy loss.
 *
 * Memory is used like a framework with no cache of its own: parameters,
 * gradients and AdamW moments are allocated once (model_create); every
 * activation and temporary is allocated when produced and freed after its
 * last use, in the forward pass when backward does not need it, else in
 * backward. docs/workload.md lists the pattern.
 */
#ifndef KERNELS_MODEL_H
#define KERNELS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"
#include "ops.h"

typedef struct model_config_s {
  int layers, channels, heads, vocab;
  int patch_dim;   /* values per image patch */
  int mel_bins;    /* values per audio frame */
} model_config_t;

/* One parameter tensor: where it lies in the parameter (and gradient) buffer. */
typedef struct model_tensor_s {
  char name[24];
  int layer;          /* -1 outside the blocks */
  size_t offset, count;
  int init;           /* how model_create fills it */
} model_tensor_t;

typedef struct model_s model_t;

/* NULL when the configuration holds together, else what is wrong. */
const char *model_config_check(const model_config_t *cfg);
/* Allocates and initializes parameters (seeded), gradients and moments. */
model_t *model_create(const model_config_t *cfg, const ops_t *ops, uint64_t seed);
/* Frees everything the model holds, activations included. */
void model_destroy(model_t *m);

/* Forward pass of one batch; keeps what backward needs and returns the mean
 * loss over the text targets. */
float model_forward(model_t *m, const batch_t *b);
/* Backward pass of the last forward: zeroes and fills the gradients, frees
 * every activation. */
void model_backward(model_t *m);
/* Frees the activations of the last forward without a backward pass. */
void model_discard(model_t *m);
/* One AdamW step with the gradients of the last backward. */
void model_update(model_t *m, float lr, float weight_decay);
/* Makes the next backward pass keep one activation (the first block's MLP
 * input) without freeing it: the deliberate leak of --leak-every. */
void model_leak_next_backward(model_t *m);

size_t model_num_params(const model_t *m);
/* The parameter and gradient buffers (device memory). */
float *model_params(model_t *m);
float *model_grads(model_t *m);
int model_tensor_count(const model_t *m);
const model_tensor_t *model_tensor(const model_t *m, int i);

#endif /* KERNELS_MODEL_H */
